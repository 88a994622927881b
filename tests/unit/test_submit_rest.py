"""``malleable submit --config`` to a REST site, against a small local stand-in for
slurmrestd (what it is sent; tests/integration/test_site_rest.py runs the real one)."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from malleable.cli import main
from malleable.site import tag as tags

VERSION = "v0.0.42"


def _jwt(user: str, exp: float) -> str:
    def part(doc: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")

    return f"{part({'alg': 'HS256'})}.{part({'exp': int(exp), 'sun': user})}.c2ln"


class FakeRest:
    """Answers ``GET /openapi/v3`` and ``POST job/submit`` as slurmrestd 24.11 does (the
    job id, with the held job's 2042 beside it); keeps what it was sent."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.sent: list[tuple[str, str, dict[str, str], dict[str, Any]]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _answer(self, status: int, doc: dict[str, Any]) -> None:
                body = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                fake.sent.append(("GET", self.path, dict(self.headers), {}))
                if fake.status != 200:
                    self._answer(fake.status, {"errors": [{"description": "token"}]})
                elif self.path == "/openapi/v3":
                    self._answer(200, {"paths": {f"/slurm/{VERSION}/jobs": {}}})
                else:
                    self._answer(404, {})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                doc = json.loads(self.rfile.read(length) or b"{}")
                fake.sent.append(("POST", self.path, dict(self.headers), doc))
                if self.path == f"/slurm/{VERSION}/job/submit":
                    self._answer(200, {"job_id": 77, "errors": [
                        {"error_number": 2042, "description": "held"}]})
                else:
                    self._answer(404, {})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def posts(self) -> list[dict[str, Any]]:
        return [doc for method, _, _, doc in self.sent if method == "POST"]


@pytest.fixture
def rest() -> Iterator[FakeRest]:
    fake = FakeRest()
    thread = threading.Thread(target=fake.server.serve_forever, daemon=True)
    thread.start()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


def _config(tmp_path: Path, url: str, workdir: str | None = "/home/alice",
            user: str = "alice") -> Path:
    token = tmp_path / "alice.jwt"
    token.write_text(f"SLURM_JWT={_jwt(user, time.time() + 600)}\n")
    token.chmod(0o600)
    path = tmp_path / "clusters.toml"
    lines = ['[clusters.vu]', 'transport = "rest"', f'url = "{url}"',
             f'token_file = "{token}"']
    if workdir is not None:
        lines.append(f'workdir = "{workdir}"')
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_rest_site_gets_a_held_tagged_job_of_the_tokens_user(
        rest: FakeRest, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path, rest.url)
    code = main(["submit", "--config", str(config), "--site", "vu", "--min", "1", "--max", "3",
                 "--time", "10", "--", "sleep", "60"])
    assert code == 0 and capsys.readouterr().out.strip() == "77"
    (body,) = rest.posts()
    job = body["job"]
    assert body["script"] == "#!/bin/sh\nexec sleep 60\n"
    assert job["hold"] is True and job["shared"] == ["none"]
    # no maximum: the service may place it at any size up to --max (NumNodes, then release)
    assert job["minimum_nodes"] == 1 and "maximum_nodes" not in job
    assert job["current_working_directory"] == "/home/alice" and job["name"] == "sleep"
    assert job["time_limit"] == {"set": True, "number": 10}
    assert "USER=alice" in job["environment"]
    parsed = tags.parse(job["comment"], "alice")  # the owner Slurm will report
    assert (parsed.min_size, parsed.max_size) == (1, 3)
    assert json.loads(job["comment"])["user"] == "alice"
    headers = next(h for method, _, h, _ in rest.sent if method == "POST")
    assert headers["X-SLURM-USER-NAME"] == "alice"
    assert headers["X-SLURM-USER-TOKEN"] == (tmp_path / "alice.jwt").read_text().strip()[10:]


@pytest.mark.parametrize("workdir", [None, "/tmp", "/var/tmp/"])
def test_a_rest_submission_refuses_a_shared_temporary_workdir(
        rest: FakeRest, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        workdir: str | None) -> None:
    config = _config(tmp_path, rest.url, workdir=workdir)
    code = main(["submit", "--config", str(config), "--site", "vu", "--min", "1", "--max", "2",
                 "--", "sleep", "60"])
    err = capsys.readouterr().err
    assert code == 2 and "set workdir" in err and len(err.strip().splitlines()) == 1
    assert rest.sent == []


def test_bad_arguments_are_refused_before_the_token_is_read(
        rest: FakeRest, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path, rest.url)
    (tmp_path / "alice.jwt").write_text("not a token")
    code = main(["submit", "--config", str(config), "--site", "vu", "--min", "3", "--max", "2",
                 "--", "sleep", "60"])
    assert code == 2 and "--min 3" in capsys.readouterr().err
    code = main(["submit", "--config", str(config), "--site", "vu", "--min", "1", "--max", "2",
                 "--", "sleep", "60"])
    assert code == 3 and "expected one JWT" in capsys.readouterr().err
    assert rest.sent == []


def test_a_refused_token_is_one_line_and_exit_3(
        rest: FakeRest, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rest.status = 401
    config = _config(tmp_path, rest.url)
    code = main(["submit", "--config", str(config), "--site", "vu", "--min", "1", "--max", "2",
                 "--", "sleep", "60"])
    err = capsys.readouterr().err.strip()
    assert code == 3 and len(err.splitlines()) == 1 and "refused the token" in err
    assert rest.posts() == []
