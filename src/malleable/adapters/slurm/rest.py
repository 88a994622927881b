"""The REST transport of the Slurm adapter: slurmrestd with JWT, no SSH at all.

:class:`RestCtl` answers every call of :class:`~malleable.adapters.slurm.ctl.SlurmCtl`
(what :class:`~malleable.adapters.slurm.cluster.SlurmCluster` and
:class:`~malleable.adapters.slurm.resize.Resizer` use) with HTTP requests through one
:class:`requests.Session` (connection reuse, timeouts, bounded retries of reads):

* **poll**: ``GET nodes`` then ``GET jobs``: two requests whatever the job count;
* **submit**: ``POST job/submit`` (``--hold`` becomes ``"hold": true``); **release**:
  ``POST job/ID`` with ``{"hold": false}``; **cancel**: ``DELETE job/ID``;
* **shrink**: ``POST job/ID`` with the node count (:func:`~.restapi.resize_body`);
* **expand** (v0.0.40+): ``POST job/allocate`` with ``immediate`` and
  ``dependency=expand:J`` (without ``immediate`` slurmrestd may answer success for an
  allocation slurmctld has already killed), then ``POST job/H {"minimum_nodes": 0}`` hands
  the helper's nodes to J. On v0.0.38 (Slurm 22.05) there is no ``job/allocate``: every
  grow is refused with that reason (:data:`NO_ALLOCATE`).
* **accounting**: ``GET slurmdb/vX/jobs`` (slurmdbd must accept the JWT too).

The API version is the newest one both the server (``GET /openapi/v3``, read once) and
:mod:`~.restapi` speak. The token comes from ``token_file`` (read again when it changes) or
``token_command`` (run again before the token expires); a token slurmrestd rejects twice is
an :class:`~malleable.errors.ExternalError` saying so (a site failure, never a crash).
"""

from __future__ import annotations

import logging
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import malleable.adapters.slurm.restapi as api
from malleable.adapters.shell import Result
from malleable.adapters.slurm.ctl import HANDOVER_ENDED, Allocation, Poll, SlurmCtl
from malleable.adapters.slurm.parse import (
    ParseError,
    SlurmJob,
    SlurmNode,
    sinfo_nodes,
    squeue_jobs,
)
from malleable.errors import ExternalError

if TYPE_CHECKING:
    import requests

    from malleable.config import RestTarget

logger = logging.getLogger(__name__)

#: Why a grow is refused on APIs before v0.0.40 (the resize's reason, shown in status).
NO_ALLOCATE = ("slurmrestd {version} has no job/allocate (Slurm 22.05): a helper allocation "
               "cannot be made through REST, so this site does not grow jobs")
#: Why ``--mpi`` jobs are refused on a REST site (the ``MPI`` capability's reason).
NO_MUNGE = ("the site is reached over REST: the service cannot run `unmunge` there to check "
            "an --mpi job's channel credential (slurmrestd decodes no MUNGE credential), so "
            "--mpi jobs are not supported on this site")
#: Seconds before a token's expiry at which it is renewed.
RENEW_BEFORE = 60.0
#: Seconds between two tries of a helper allocation Slurm answered busy.
ALLOCATE_RETRY = 0.25
#: Slurm's errors of an allocation that may succeed a moment later (nodes busy: 2016).
_BUSY = ("error 2016", "nodes are busy", "Requested nodes are busy")
#: Most bytes read from a token file or command.
TOKEN_BYTES = 16384


class TokenSource:
    """The JWT sent with every request: read from a file (again whenever the file changes,
    or the token is within :data:`RENEW_BEFORE` s of its expiry) or printed by a command
    (run again at that point). Thread-safe."""

    def __init__(self, file: Path | None = None, command: Sequence[str] | None = None,
                 clock: Callable[[], float] = time.time, timeout: float = 30.0) -> None:
        if (file is None) == (command is None):
            raise ValueError("a token source needs exactly one of a file and a command")
        self.file = file
        self.command = list(command) if command is not None else None
        self.clock = clock
        self.timeout = timeout
        self._token = ""
        self._claims = api.Claims("", None)
        self._stamp: tuple[int, int] | None = None
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        return str(self.file) if self.file is not None else f"`{' '.join(self.command or [])}`"

    def get(self, renew: bool = False) -> str:
        """The token (renewed first when ``renew``, changed or near its expiry)."""
        with self._lock:
            if renew or not self._token or self._stale():
                self._load()
            return self._token

    def user(self) -> str:
        """The Slurm user the token is for (its ``sun`` claim)."""
        self.get()
        return self._claims.user

    def _stale(self) -> bool:
        exp = self._claims.expires
        if exp is not None and exp - self.clock() < RENEW_BEFORE:
            return True
        return self.file is not None and self._file_stamp() != self._stamp

    def _file_stamp(self) -> tuple[int, int] | None:
        assert self.file is not None
        try:
            st = self.file.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def _load(self) -> None:
        if self.file is not None:
            self._stamp = self._file_stamp()
            try:
                with self.file.open("r", encoding="ascii") as fh:
                    text = fh.read(TOKEN_BYTES)
            except (OSError, UnicodeError) as exc:
                raise ExternalError(f"REST token file {self.file}: {exc}") from None
        else:
            text = self._run()
        try:
            token = api.read_token(text)
            claims = api.jwt_claims(token)
        except ParseError as exc:
            raise ExternalError(f"REST token from {self.where}: {exc}") from None
        if claims.expires is not None and claims.expires <= self.clock():
            raise ExternalError(f"REST token from {self.where} expired "
                                f"{self.clock() - claims.expires:.0f} s ago: renew it "
                                "(e.g. `scontrol token username=USER lifespan=SECONDS`)")
        self._token, self._claims = token, claims

    def _run(self) -> str:
        assert self.command is not None
        try:
            done = subprocess.run(self.command, capture_output=True, text=True,
                                  timeout=self.timeout, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ExternalError(f"REST token command {self.where}: {exc}") from None
        if done.returncode != 0:
            raise ExternalError(f"REST token command {self.where} failed (exit "
                                f"{done.returncode}): {done.stderr.strip()[:200]}")
        return done.stdout[:TOKEN_BYTES]


class RestClient:
    """HTTP to one slurmrestd: a session, the API version, the token; counts requests and
    bytes (for the benchmarks)."""

    def __init__(self, url: str, tokens: TokenSource, *, user: str | None = None,
                 timeout: float = 30.0, connect_timeout: float = 10.0,
                 verify: bool | str = True, retries: int = 2) -> None:
        self.url = url.rstrip("/")
        self.tokens = tokens
        self._user = user
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.verify = verify
        self.retries = retries
        self._session: requests.Session | None = None
        self._version: tuple[int, int, int] | None = None
        self._lock = threading.Lock()
        self.requests = 0
        self.bytes = 0

    # -- session -------------------------------------------------------------------------
    def session(self) -> requests.Session:
        with self._lock:
            if self._session is None:
                import requests
                from requests.adapters import HTTPAdapter
                from urllib3.util.retry import Retry

                session = requests.Session()
                # Reads and deletes are retried on a lost connection or a busy answer;
                # submissions and updates are not (they may have been done).
                retry = Retry(total=self.retries, connect=self.retries, read=self.retries,
                              status=self.retries, backoff_factor=0.2,
                              status_forcelist=(502, 503, 504),
                              allowed_methods=frozenset({"GET", "DELETE"}),
                              raise_on_status=False)
                adapter = HTTPAdapter(max_retries=retry, pool_connections=2, pool_maxsize=8)
                session.mount("http://", adapter)
                session.mount("https://", adapter)
                session.verify = self.verify
                self._session = session
            return self._session

    def close(self) -> None:
        with self._lock:
            if self._session is not None:
                self._session.close()
                self._session = None

    @property
    def user(self) -> str:
        return self._user or self.tokens.user()

    # -- requests ------------------------------------------------------------------------
    def request(self, method: str, path: str, body: Mapping[str, Any] | None = None,
                params: Mapping[str, str] | None = None,
                timeout: float | None = None) -> tuple[int, dict[str, Any]]:
        """``METHOD url/path``: the status and the JSON answer ({} if none). A rejected
        token is read again once; rejected twice, ExternalError. Unreachable: ExternalError."""
        import requests

        for attempt in (0, 1):
            token = self.tokens.get(renew=attempt == 1)
            headers = {"X-SLURM-USER-TOKEN": token, "X-SLURM-USER-NAME": self.user}
            try:
                # verify per request: requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE in
                # the environment override a session's verify, so tls_ca would be ignored
                answer = self.session().request(
                    method, self.url + path, json=body, params=params, headers=headers,
                    timeout=(self.connect_timeout, timeout or self.timeout),
                    verify=self.verify)
            except requests.RequestException as exc:
                raise ExternalError(f"slurmrestd {self.url}: {type(exc).__name__}: "
                                    f"{str(exc)[:200]}") from None
            self.requests += 1
            self.bytes += len(answer.content)
            if answer.status_code not in (401, 403):
                break
            if attempt == 1 or (self.tokens.file is not None and not self.tokens._stale()):
                raise ExternalError(f"slurmrestd {self.url} refused the token from "
                                    f"{self.tokens.where} (HTTP {answer.status_code}): renew "
                                    "it, or check AuthAltTypes=auth/jwt and SLURM_JWT=daemon")
        try:
            data = answer.json() if answer.content else {}
        except ValueError:
            data = {}
        if not isinstance(data, dict):
            data = {}
        return answer.status_code, data

    def version(self) -> tuple[int, int, int]:
        """The API version (asked once: ``GET /openapi/v3``)."""
        if self._version is None:
            status, spec = self.request("GET", "/openapi/v3", timeout=max(self.timeout, 60.0))
            if status != 200:
                raise ExternalError(f"slurmrestd {self.url}: GET /openapi/v3 answered {status}")
            try:
                self._version = api.choose_version(api.api_versions(spec))
            except ParseError as exc:
                raise ExternalError(f"slurmrestd {self.url}: {exc}") from None
            logger.info("slurmrestd %s: API %s", self.url, api.version_text(self._version))
        return self._version

    def slurm(self, kind: str = "slurm") -> str:
        """``/slurm/vX`` (or ``/slurmdb/vX``) of the chosen version."""
        return f"/{kind}/{api.version_text(self.version())}"


class _NoCommands:
    """The runner of a REST site: it runs no commands (the cluster only closes it)."""

    def __init__(self, client: RestClient) -> None:
        self.client = client

    def run(self, argv: Sequence[str], timeout: float, *, input: str | None = None,
            check: bool = True) -> Result:
        if list(argv[:1]) == ["unmunge"]:
            raise ExternalError(NO_MUNGE)
        raise ExternalError(f"a REST site runs no commands (asked: {' '.join(argv)[:80]})")

    def close(self) -> None:
        self.client.close()


class RestCtl(SlurmCtl):
    """:class:`SlurmCtl`'s calls over slurmrestd (see the module docstring)."""

    def __init__(self, client: RestClient, timeout: float = 30.0,
                 partition: str | None = None, workdir: str = "/tmp") -> None:
        super().__init__(_NoCommands(client), timeout, partition, None)
        self.client = client
        self.workdir = workdir

    @property
    def user(self) -> str | None:
        return self.client.user

    @user.setter
    def user(self, value: str | None) -> None:
        pass  # the token says who we are

    def missing(self) -> dict[str, str]:
        """``MPI`` always (no ``unmunge`` over REST: :data:`NO_MUNGE`); ``EXPAND`` on APIs
        without ``job/allocate`` (asks the server's version)."""
        version = self.client.version()
        if api.can_allocate(version):
            return {"MPI": NO_MUNGE}
        return {"EXPAND": NO_ALLOCATE.format(version=api.version_text(version)),
                "MPI": NO_MUNGE}

    def _answer(self, method: str, path: str, body: Mapping[str, Any] | None = None,
                params: Mapping[str, str] | None = None) -> tuple[int, dict[str, Any]]:
        return self.client.request(method, self.client.slurm() + path, body, params)

    @staticmethod
    def _result(status: int, data: Mapping[str, Any]) -> Result:
        errors = api.errors_of(data)
        ok = 200 <= status < 300 and not errors
        return Result(0 if ok else 1, "", "" if ok else (errors or f"HTTP {status}"))

    # -- reading -------------------------------------------------------------------------
    def poll(self) -> Poll:
        """``GET nodes`` then ``GET jobs`` (nodes first, as the SSH transport)."""
        _, nodes = self._read("/nodes")
        _, jobs = self._read("/jobs")
        try:
            return Poll(tuple(parse_squeue_json_data(jobs)), tuple(parse_sinfo_data(nodes)))
        except ParseError as exc:
            raise ExternalError(f"slurmrestd poll: {exc}") from None

    def _read(self, path: str) -> tuple[int, dict[str, Any]]:
        status, data = self._answer("GET", path)
        if status != 200:
            raise ExternalError(f"slurmrestd GET {path}: HTTP {status} "
                                f"{api.errors_of(data)}".strip())
        return status, data

    def show_job(self, job_id: int) -> SlurmJob | None:
        status, data = self._answer("GET", f"/job/{int(job_id)}")
        errors = api.errors_of(data)
        if status != 200 and ("Invalid job id" in errors or "not found" in errors.lower()
                              or status == 404):
            return None
        if status != 200:
            raise ExternalError(f"slurmrestd GET job/{job_id}: HTTP {status} {errors}".strip())
        try:
            jobs = parse_squeue_json_data(data)
        except ParseError as exc:
            raise ExternalError(f"slurmrestd job/{job_id}: {exc}") from None
        return next((j for j in jobs if j.job_id == job_id), None)

    def accounting(self, job_ids: Sequence[int]) -> list[SlurmJob]:
        if not job_ids:
            return []
        return self._slurmdb_jobs({"step": ",".join(str(int(j)) for j in job_ids)})

    def accounting_named(self, names: Sequence[str], since: str = "now-7days"
                         ) -> list[SlurmJob]:
        if not names:
            return []
        return self._slurmdb_jobs({"job_name": ",".join(names), "start_time": since})

    def _slurmdb_jobs(self, params: Mapping[str, str]) -> list[SlurmJob]:
        status, data = self.client.request("GET", self.client.slurm("slurmdb") + "/jobs",
                                           params=params)
        if status != 200:
            raise ExternalError(f"slurmrestd GET slurmdb jobs: HTTP {status} "
                                f"{api.errors_of(data)}".strip())
        try:
            return api.parse_slurmdb_jobs(data)
        except ParseError as exc:
            raise ExternalError(f"slurmrestd slurmdb jobs: {exc}") from None

    def admin_level(self, user: str) -> str:
        status, data = self.client.request("GET", self.client.slurm("slurmdb") + f"/user/{user}")
        return api.admin_level(data) if status == 200 else "None"

    def job_fields(self, job_id: int) -> dict[str, Any]:
        """Account, partition, QoS, reservation, time limit of a job, from accounting."""
        status, data = self.client.request("GET",
                                           self.client.slurm("slurmdb") + f"/job/{int(job_id)}")
        if status != 200:
            raise ExternalError(f"slurmrestd slurmdb job/{job_id}: HTTP {status}")
        return api.slurmdb_fields(data, job_id)

    # -- acting --------------------------------------------------------------------------
    def _description(self, options: Sequence[str], immediate: bool = False) -> dict[str, Any]:
        return api.job_description([*self._partition(), *options], self.client.version(),
                                   user=self.client.user, workdir=self.workdir,
                                   immediate=immediate)

    def submit(self, options: Sequence[str], script: str) -> int:
        body = {"script": script, "job": self._description(options)}
        status, data = self._answer("POST", "/job/submit", body)
        errors = api.errors_of(data)
        try:
            job_id = api.job_id_of(data)
        except ParseError:
            job_id = 0
        # A held job comes back with an "error" 2042 (held, pending release) beside its id.
        if status != 200 or not job_id:
            raise ExternalError(f"slurmrestd job/submit: HTTP {status} {errors}".strip())
        return job_id

    def update_nodes(self, job_id: int, nodes: str) -> Result:
        if nodes == "ALL":
            # the hand-over (minimum_nodes=0 on the helper) already moved the nodes into the
            # job over REST: there is nothing to take up
            return Result(0, "", "")
        return self._update(job_id, api.resize_body(nodes, self.client.version()))

    def update_node_list(self, job_id: int, nodes: str) -> Result:
        return self._update(job_id, {"required_nodes": nodes} if self.client.version()
                            >= api.DATA_PARSER else {"nodes": nodes})

    def _update(self, job_id: int, body: Mapping[str, Any]) -> Result:
        status, data = self._answer("POST", f"/job/{int(job_id)}", body)
        return self._result(status, data)

    def hand_over(self, job_id: int, helper: int) -> Result:
        job = self.show_job(job_id)
        if job is None or job.state_raw.split(" ")[0] != "RUNNING":
            return Result(HANDOVER_ENDED, "", f"job {job_id} is no longer RUNNING")
        return self._update(helper, {"minimum_nodes": 0})

    def cancel(self, job_id: int) -> Result:
        status, data = self._answer("DELETE", f"/job/{int(job_id)}")
        return self._result(status, data)

    def release(self, job_id: int) -> Result:
        return self._update(job_id, {"hold": False})

    def allocate(self, nodes: int, options: Sequence[str], wait: float) -> Allocation:
        """``POST job/allocate`` with ``immediate`` (granted now or refused at once)."""
        version = self.client.version()
        if not api.can_allocate(version):
            return Allocation(None, False, NO_ALLOCATE.format(version=api.version_text(version)))
        try:
            job = self._description([f"--nodes={nodes}", *options], immediate=True)
        except ValueError as exc:
            return Allocation(None, False, str(exc))
        # `immediate` answers at once; like salloc's --immediate=WAIT, a busy answer (nodes
        # just released are still completing) is asked again until `wait` s have passed.
        deadline = time.monotonic() + wait
        while True:
            status, data = self._answer("POST", "/job/allocate", {"job": job})
            errors = api.errors_of(data)
            try:
                job_id: int | None = api.job_id_of(data)
            except ParseError:
                job_id = None
            if job_id is not None or not _busy(errors) or time.monotonic() >= deadline:
                break
            time.sleep(ALLOCATE_RETRY)
        if status != 200 or job_id is None:
            return Allocation(job_id, False, errors or f"job/allocate: HTTP {status}")
        # Confirm by reading it back: slurmrestd may answer success for a job slurmctld has
        # already ended (the trap of an allocation without `immediate`).
        shown = self.show_job(job_id)
        if shown is None or shown.state_raw.split(" ")[0] != "RUNNING":
            state = "gone" if shown is None else shown.state_raw
            return Allocation(job_id, False, f"helper {job_id} is {state} after job/allocate")
        return Allocation(job_id, True, "")


def parse_squeue_json_data(data: Mapping[str, Any]) -> list[SlurmJob]:
    """Jobs of a ``GET jobs`` or ``GET job/ID`` answer (the layout of ``squeue --json``)."""
    return squeue_jobs(data, "slurmrestd jobs")


def parse_sinfo_data(data: Mapping[str, Any]) -> list[SlurmNode]:
    """Nodes of a ``GET nodes`` answer."""
    return sinfo_nodes(data, "slurmrestd nodes")


def _busy(errors: str) -> bool:
    return any(word in errors for word in _BUSY)


def rest_ctl_for(target: RestTarget, timeout: float, partition: str | None) -> RestCtl:
    """The REST transport of a configured site (no I/O yet)."""
    tokens = TokenSource(target.token_file, target.token_command)
    client = RestClient(target.url, tokens, user=target.user, timeout=timeout,
                        verify=target.verify)
    return RestCtl(client, timeout, partition, target.workdir)


def rest_health(url: str, token: str, timeout: float = 10.0) -> str:
    """``ok (API vX)`` when slurmrestd at ``url`` answers an authenticated ping, else what
    is wrong (one line; never raises). For ``testbed status``."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "token"
        path.write_text(token, encoding="ascii")
        client = RestClient(url, TokenSource(file=path), timeout=timeout, retries=0)
        try:
            version = client.version()
            status, data = client.request("GET", client.slurm() + "/ping")
        except ExternalError as exc:
            return f"down: {exc}"[:160]
        finally:
            client.close()
    if status != 200:
        return f"ping answered HTTP {status} {api.errors_of(data)}".strip()[:160]
    return f"ok (API {api.version_text(version)})"
