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
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
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
                 repo: str = REPO, no_cache: bool = False, slurm: str = versions.DEFAULT) -> str:
    """Build the testbed image of Slurm version ``slurm`` unless one from the same context
    exists; return its tag.

    The tag is ``REPO:<context hash>`` (also tagged ``REPO:latest`` for the default version,
    ``REPO:slurm-V`` for another), so checkouts with different sources never overwrite each
    other's image. ``no_cache`` rebuilds every layer (the benchmark's cold build).
    """
    versions.check(slurm)
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
    prune_old_images(docker)
    return tag


def prune_old_images(docker: Docker) -> None:
    """Remove testbed images older than a day that no container uses (docker refuses those)."""
    docker.docker_cmd("image", "prune", "--all", "--force", "--filter", f"label={LABEL_CONTEXT}",
                      "--filter", f"until={PRUNE_AFTER}", check=False, timeout=300)
