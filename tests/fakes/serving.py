"""Helpers of the integration tests that run ``malleable manager serve`` on a testbed with
OAR sites: oarstat and oarsub as a user on a site, and the service in one site's controller
as ``malleable`` (never root)."""

from __future__ import annotations

import json
from typing import Any

from malleable.adapters.oar.ctl import _submitted_ids
from malleable.testbed import Testbed
from tests.fakes.waits import wait_for


def oar_jobs(tb: Testbed, site: str, *ids: int) -> dict[int, dict[str, Any]]:
    """``oarstat -fJ -j ID...`` (or the whole queue, ``oarstat -J``) on an OAR site, by id."""
    argv = ["oarstat", "-fJ", *(a for i in ids for a in ("-j", str(i)))] if ids \
        else ["oarstat", "-J"]
    out = tb.exec(site, argv, check=True).stdout
    return {int(k): v for k, v in json.loads(out or "{}").items()}


def oar_state(tb: Testbed, site: str, job: int) -> str:
    """OAR's state of one job (``Hold``, ``Running``, ``Terminated``, ``Error``...)."""
    return str(oar_jobs(tb, site, job)[job]["state"])


def oarsub_as(tb: Testbed, site: str, user: str, *options: str) -> int:
    """``oarsub`` in ``user``'s login shell (``docker exec -u`` cannot run it): the id."""
    script = "cd && oarsub -J " + " ".join(f"'{o}'" for o in options)
    (job_id,) = _submitted_ids(tb.exec(site, ["su", "-", user, "-c", script], check=True,
                                       timeout=60).stdout)
    return job_id


class Serve:
    """``malleable manager serve --config`` (``config``, written in ``home``) in ``site``'s
    controller as ``malleable`` (never root); its log, status and stop."""

    def __init__(self, tb: Testbed, site: str, home: str, config: str) -> None:
        self.tb, self.site, self.home = tb, site, home
        self.sh(f"mkdir -p {home} && cat > {home}/manager.toml", input_text=config)
        self.sh(f"cd {home} && nohup sh -c 'malleable manager serve --config manager.toml; "
                "echo exit=$? >&2' > serve.log 2>&1 < /dev/null &")

    def sh(self, script: str, input_text: str | None = None, check: bool = True) -> str:
        return self.tb.exec(self.site, ["sh", "-c", script], user="malleable", timeout=60,
                            input_text=input_text, check=check).stdout

    def status(self) -> dict[str, Any]:
        text = self.sh(f"cat {self.home}/state.sqlite.status.json 2>/dev/null || true")
        return json.loads(text) if text.strip() else {}

    def job(self, job_id: str) -> dict[str, Any]:
        return next((j for j in self.status().get("jobs", ()) if j["id"] == job_id), {})

    def text(self) -> str:
        return self.sh(f"cat {self.home}/serve.log 2>/dev/null || true")

    def pid(self) -> str:
        # the oldest: a child forked to run a command has the same command line until it execs
        return self.sh("pgrep -o -u malleable -f '^python3 -m malleable manager serve' "
                       "|| true").strip()

    def stop(self) -> None:
        pid = self.pid()
        if pid:
            self.sh(f"kill -TERM {pid}", check=False)
            wait_for(lambda: not self.pid(), 120, "the service to stop")

    def close(self) -> None:
        """Stop, print the log (pytest shows it when the test failed), remove ``home``."""
        self.stop()
        print("".join(line for line in self.text().splitlines(keepends=True)
                      if "paramiko" not in line)[-8000:])
        self.sh(f"rm -rf {self.home}", check=False)
