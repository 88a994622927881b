"""The testbed's images: a Debian base per Slurm version, and the testbed image built on it.

The default version (Slurm 22.05) builds on ``debian:bookworm`` when that image is present
(or the image named with ``MALLEABLE_BASE_IMAGE``); otherwise ``malleable-base:bookworm``
is built locally by ``testbed/base-image.sh`` (mmdebstrap of the host's own apt sources,
then ``docker import``). Other versions use their suite's base the same way
(:mod:`.versions`: ``malleable-base:trixie`` for 24.11, ``malleable-base:sid`` for 26.05).
The testbed image carries a label with a hash of its build context (the Dockerfile, the
scripts, the malleable sources, the Slurm version and the base image's id) and is tagged
with it: it is built only when no image of that hash exists. The default version's image
is also ``malleable-testbed:latest``; another version's is ``malleable-testbed:slurm-V``.
``MALLEABLE_TESTBED_REPO`` names another repository for them (a repository of one's own,
to build without retagging the shared images; it is never pruned).

Another process may be building the images (``.ci/testbed-setup.sh images`` in ``.ci/run``,
while the tests run): with ``MALLEABLE_IMAGES_WAIT=DIR``, :func:`ensure_image` first waits
for that build of its version (:func:`wait_for_build`, the status files in DIR), bounded, and
never builds that version a second time beside it.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import malleable.testbed.versions as versions
from malleable.errors import ExternalError
from malleable.testbed.docker import Docker

logger = logging.getLogger(__name__)

REPO = "malleable-testbed"
IMAGE = f"{REPO}:latest"
#: Testbed images unused for this long are removed after a build.
PRUNE_AFTER = "24h"
LOCAL_BASE = "malleable-base:bookworm"
PUBLIC_BASE = "debian:bookworm"
LABEL_CONTEXT = "org.malleable.context"
#: Files of testbed/ that go into the build context.
CONTEXT_FILES = ("Dockerfile", "entrypoint.sh", "healthcheck.sh", "sshd_config")
BASE_TIMEOUT = 900.0
BUILD_TIMEOUT = 1800.0
#: Environment: the status directory of another process's image build to wait for.
WAIT_ENV = "MALLEABLE_IMAGES_WAIT"
#: Environment: seconds to wait for it at most (default :data:`WAIT_TIMEOUT`).
WAIT_TIMEOUT_ENV = "MALLEABLE_IMAGES_WAIT_TIMEOUT"
#: The images' whole cold build measured 10-20 min here (issue 37): 2,400 s is its budget.
WAIT_TIMEOUT = 2400.0
#: Seconds between two looks at the build's status.
WAIT_POLL = 2.0
#: Environment: the repository of the testbed images (default :data:`REPO`).
REPO_ENV = "MALLEABLE_TESTBED_REPO"


def testbed_dir() -> Path:
    """The ``testbed/`` directory (Dockerfile, templates, scripts) of this checkout."""
    env = os.environ.get("MALLEABLE_TESTBED_DIR")
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parents[3] / "testbed")
    for path in candidates:
        if (path / "Dockerfile").is_file():
            return path
    raise ExternalError("cannot find the testbed/ directory (Dockerfile and templates): run "
                        "from a checkout of malleable or set MALLEABLE_TESTBED_DIR")


def package_dir() -> Path:
    """The ``malleable`` package sources that go into the image."""
    return Path(__file__).resolve().parents[1]


def _source_files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            yield path


def context_hash(tb_dir: Path, pkg_dir: Path, base_id: str,
                 slurm: str = versions.DEFAULT) -> str:
    """Hash of everything the testbed image is built from."""
    digest = hashlib.sha256(base_id.encode())
    if slurm != versions.DEFAULT:  # the default's hash stays what it was
        digest.update(b"slurm\0" + slurm.encode())
    for name in CONTEXT_FILES:
        digest.update(name.encode() + b"\0" + (tb_dir / name).read_bytes())
    for path in _source_files(pkg_dir):
        digest.update(str(path.relative_to(pkg_dir)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def image_id(docker: Docker, image: str) -> str | None:
    result = docker.docker_cmd("image", "inspect", "--format", "{{.Id}}", image, check=False)
    return result.stdout.strip() if result.ok else None


def image_label(docker: Docker, image: str, label: str) -> str | None:
    fmt = "{{index .Config.Labels \"" + label + "\"}}"
    result = docker.docker_cmd("image", "inspect", "--format", fmt, image, check=False)
    return result.stdout.strip() if result.ok else None


def _read_small(path: Path, limit: int = 4096) -> str | None:
    """The start of a small status file, or None when it does not exist (yet)."""
    try:
        with path.open("rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except FileNotFoundError:
        return None


def wait_for_build(status_dir: Path, slurm: str, *, timeout: float = WAIT_TIMEOUT,
                   poll: float | None = None, clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], None] = time.sleep) -> bool:
    """Wait until the image build that writes ``status_dir`` is done with version ``slurm``.

    The builder (``.ci/testbed-setup.sh images`` with ``MALLEABLE_IMAGES_STATUS=DIR``) writes
    ``plan`` (the versions it will build, one a line) first, then ``V.status`` (its exit
    status) and ``V.log`` for each version, and ``done`` when it ends. Returns False when
    ``slurm`` is not in the plan (or there is none: no build to wait for), True once its
    status is 0. Raises :class:`ExternalError`, naming the image and the build's log, when
    that build failed, when the builder ended without building it, or after ``timeout`` s.
    """
    poll = WAIT_POLL if poll is None else poll
    plan = _read_small(status_dir / "plan")
    if plan is None or slurm not in plan.split():
        return False
    log = status_dir / f"{slurm}.log"
    what = f"the Slurm {slurm} testbed image"
    start = clock()
    logged = False
    while True:
        status = _read_small(status_dir / f"{slurm}.status")
        if status is not None:
            if status.strip() == "0":
                waited = clock() - start
                if waited >= poll:
                    logger.info("waited %.0f s for %s (built by another process)", waited, what)
                return True
            raise ExternalError(f"{what} failed to build (exit status {status.strip()[:20]}) "
                                f"in the build the tests wait for: see its log {log}")
        if _read_small(status_dir / "done") is not None:
            raise ExternalError(f"the image build the tests wait for ended without building "
                                f"{what}: see its log {log}")
        if not logged:  # said once, where a test's captured log shows it
            logger.info("waiting for %s, built by another process (log: %s)", what, log)
            logged = True
        if clock() - start >= timeout:
            raise ExternalError(f"{what} was not built within {timeout:.0f} s by the build the "
                                f"tests wait for ({WAIT_TIMEOUT_ENV} to wait longer): see its "
                                f"log {log}")
        sleep(poll)


def _wait_from_env(slurm: str) -> None:
    """Wait for another process's build of ``slurm`` when ``MALLEABLE_IMAGES_WAIT`` says so."""
    status_dir = os.environ.get(WAIT_ENV, "")
    if not status_dir:
        return
    raw = os.environ.get(WAIT_TIMEOUT_ENV, "")
    try:
        timeout = float(raw) if raw else WAIT_TIMEOUT
    except ValueError:
        timeout = math.nan
    if not 0 < timeout < math.inf:  # "nan" would wait for ever, "-1" not at all
        raise ExternalError(f"{WAIT_TIMEOUT_ENV}={raw[:40]!r}: give a number of seconds "
                            "above 0")
    wait_for_build(Path(status_dir), slurm, timeout=timeout)


def ensure_base(docker: Docker, base: str | None = None, *, local: str | None = None,
                slurm: str = versions.DEFAULT) -> str:
    """The base image to build on, building ``local`` when nothing else is present.

    ``MALLEABLE_BASE_IMAGE`` names a bookworm image: it applies to the default version only.
    """
    if slurm == versions.DEFAULT:
        base = base or os.environ.get("MALLEABLE_BASE_IMAGE")
    if base:
        return base
    local = local or versions.local_base(slurm)
    for candidate in (versions.public_base(slurm), local):
        if image_id(docker, candidate):
            return candidate
    build_base(docker, local, versions.suite(slurm))
    return local


def build_base(docker: Docker, tag: str = LOCAL_BASE, suite: str = "bookworm") -> None:
    """Build a Debian base image of ``suite`` with mmdebstrap from the host's apt sources
    (bookworm ~20 s; trixie and sid a few minutes)."""
    logger.info("building %s (%s) with mmdebstrap from the host's apt sources", tag, suite)
    script = testbed_dir() / "base-image.sh"
    docker.run(("bash", str(script), tag, suite), timeout=BASE_TIMEOUT)


def _prepare_context(ctx: Path, tb_dir: Path, pkg_dir: Path) -> None:
    for name in CONTEXT_FILES:
        shutil.copy2(tb_dir / name, ctx / name)
    dest = ctx / "malleable-src" / "malleable"
    for path in _source_files(pkg_dir):
        target = dest / path.relative_to(pkg_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


def ensure_image(docker: Docker, base: str | None = None, *, force: bool = False,
                 repo: str | None = None, no_cache: bool = False,
                 slurm: str = versions.DEFAULT) -> str:
    """Build the testbed image of Slurm version ``slurm`` unless one from the same context
    exists; return its tag.

    The tag is ``REPO:<context hash>`` (also tagged ``REPO:latest`` for the default version,
    ``REPO:slurm-V`` for another), so checkouts with different sources never overwrite each
    other's image. ``no_cache`` rebuilds every layer (the benchmark's cold build).
    ``repo`` defaults to ``MALLEABLE_TESTBED_REPO`` or :data:`REPO`. With
    ``MALLEABLE_IMAGES_WAIT`` set, another process's build of this version is waited for
    first (:func:`wait_for_build`).
    """
    versions.check(slurm)
    _wait_from_env(slurm)
    repo = repo or os.environ.get(REPO_ENV) or REPO
    base = ensure_base(docker, base, slurm=slurm)
    base_id = image_id(docker, base) or base
    tb_dir, pkg_dir = testbed_dir(), package_dir()
    wanted = context_hash(tb_dir, pkg_dir, base_id, slurm)
    tag = f"{repo}:{wanted}"
    if not force and image_label(docker, tag, LABEL_CONTEXT) == wanted:
        logger.info("image %s is up to date", tag)
        return tag
    logger.info("building %s from %s (Slurm %s)", tag, base, slurm)
    alias = f"{repo}:latest" if slurm == versions.DEFAULT else f"{repo}:slurm-{slurm}"
    with tempfile.TemporaryDirectory(prefix="malleable-testbed-") as tmp:
        ctx = Path(tmp)
        _prepare_context(ctx, tb_dir, pkg_dir)
        docker.docker_cmd("build", "--quiet", *(("--no-cache",) if no_cache else ()),
                          "--build-arg", f"BASE_IMAGE={base}",
                          "--build-arg", f"WITH_OAR={'yes' if versions.has_oar(slurm) else 'no'}",
                          "--label", f"{LABEL_CONTEXT}={wanted}", "--tag", tag,
                          "--tag", alias, str(ctx), timeout=BUILD_TIMEOUT)
    if repo == REPO:  # a repository of one's own is left alone
        prune_old_images(docker)
    return tag


def prune_old_images(docker: Docker) -> None:
    """Remove testbed images older than a day that no container uses (docker refuses those)."""
    docker.docker_cmd("image", "prune", "--all", "--force", "--filter", f"label={LABEL_CONTEXT}",
                      "--filter", f"until={PRUNE_AFTER}", check=False, timeout=300)
