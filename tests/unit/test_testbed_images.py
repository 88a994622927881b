"""Image reuse (context hash), the build context, and the base-image script's sources."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from malleable.errors import ExternalError
from malleable.testbed import images
from malleable.testbed.docker import Docker, Result

TB = images.testbed_dir()


def _pkg(tmp_path: Path) -> Path:
    pkg = tmp_path / "malleable"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("x = 1\n")
    (pkg / "sub" / "m.py").write_text("y = 2\n")
    (pkg / "sub" / "__pycache__").mkdir()
    (pkg / "sub" / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"junk")
    return pkg


def test_context_hash_follows_sources_and_base(tmp_path: Path) -> None:
    pkg = _pkg(tmp_path)
    first = images.context_hash(TB, pkg, "sha256:a")
    assert images.context_hash(TB, pkg, "sha256:a") == first
    assert images.context_hash(TB, pkg, "sha256:b") != first
    (pkg / "sub" / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"other junk")
    assert images.context_hash(TB, pkg, "sha256:a") == first
    (pkg / "sub" / "m.py").write_text("y = 3\n")
    assert images.context_hash(TB, pkg, "sha256:a") != first


def test_build_context_holds_dockerfile_scripts_and_sources(tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    images._prepare_context(ctx, TB, _pkg(tmp_path))
    files = sorted(str(p.relative_to(ctx)) for p in ctx.rglob("*") if p.is_file())
    assert files == sorted([*images.CONTEXT_FILES, "malleable-src/malleable/__init__.py",
                            "malleable-src/malleable/sub/m.py"])


def test_dockerfile_takes_a_base_image_and_never_the_emulator() -> None:
    text = (TB / "Dockerfile").read_text()
    assert "ARG BASE_IMAGE=debian:bookworm" in text
    assert "FROM ${BASE_IMAGE}" in text
    installs = text.split("apt-get install", 1)[1].split("&&", 1)[0]
    for pkg in ("slurmctld", "slurmd", "slurmdbd", "slurm-client", "munge", "mariadb-server",
                "openssh-server", "openmpi-bin", "python3-mpi4py", "python3-numpy"):
        assert pkg in installs.split(), pkg
    assert "slurm-wlm-emulator" not in installs


def test_oar_images_carry_sudo_and_only_the_service_s_rule_as_oar() -> None:
    """docs/notes/issue-15-serve-design.md: the one privilege the OAR site service needs."""
    text = (TB / "Dockerfile").read_text()
    layer = next(part for part in text.split("\nRUN ") if "/etc/sudoers.d/malleable-oar" in part)
    assert layer.startswith('if [ "$WITH_OAR" = yes ]')
    assert "install -y --no-install-recommends sudo" in layer
    assert "'malleable ALL=(oar) NOPASSWD: /usr/bin/oarresume, /usr/bin/oardel'" in layer
    assert "chmod 0440 /etc/sudoers.d/malleable-oar" in layer and "visudo -cf" in layer
    assert text.count("NOPASSWD") == 1


def test_testbed_dir_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "Dockerfile").write_text("FROM x\n")
    monkeypatch.setenv("MALLEABLE_TESTBED_DIR", str(tmp_path))
    assert images.testbed_dir() == tmp_path


class _Images(Docker):
    """Answers image inspections from a dict; records builds."""

    def __init__(self, present: dict[str, dict[str, str]]) -> None:
        super().__init__()
        self.present = present
        self.calls: list[tuple[str, ...]] = []

    def run(self, argv: Sequence[str], *, timeout: float, check: bool = True,
            input_text: str | None = None) -> Result:
        args = tuple(argv)
        self.calls.append(args)
        if args[1:3] == ("image", "inspect"):
            image, fmt = args[-1], args[-2]
            if image not in self.present:
                return Result(args, 1, "", "No such image")
            key = "id" if fmt == "{{.Id}}" else "label"
            return Result(args, 0, self.present[image].get(key, "") + "\n", "")
        return Result(args, 0, "", "")


def test_up_to_date_image_is_reused() -> None:
    base_id = "sha256:base"
    wanted = images.context_hash(TB, images.package_dir(), base_id)
    tag = f"{images.REPO}:{wanted}"
    docker = _Images({"debian:bookworm": {"id": base_id}, tag: {"id": "sha256:img",
                                                                 "label": wanted}})
    assert images.ensure_image(docker) == tag
    assert not any("build" in c for c in docker.calls)


def test_missing_image_is_built_with_its_hash_tag_then_old_ones_pruned() -> None:
    docker = _Images({images.LOCAL_BASE: {"id": "sha256:local"},
                      images.IMAGE: {"id": "sha256:other-checkout", "label": "other"}})
    tag = images.ensure_image(docker)
    wanted = images.context_hash(TB, images.package_dir(), "sha256:local")
    assert tag == f"{images.REPO}:{wanted}"
    build = next(c for c in docker.calls if "build" in c)
    assert f"BASE_IMAGE={images.LOCAL_BASE}" in build
    assert f"{images.LABEL_CONTEXT}={wanted}" in build
    assert build[build.index("--tag") + 1] == tag and images.IMAGE in build
    assert "--no-cache" not in build
    prune = docker.calls[-1]
    assert prune[1:5] == ("image", "prune", "--all", "--force")
    assert f"label={images.LABEL_CONTEXT}" in prune and "until=24h" in prune
    assert not any(c[1] == "rmi" for c in docker.calls)


def test_missing_base_runs_the_base_image_script() -> None:
    docker = _Images({})
    assert images.ensure_base(docker) == images.LOCAL_BASE
    script = next(c for c in docker.calls if c[0] == "bash")
    assert script[1].endswith("base-image.sh") and script[2] == images.LOCAL_BASE


def test_explicit_base_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    docker = _Images({})
    assert images.ensure_base(docker, "my/debian:12") == "my/debian:12"
    monkeypatch.setenv("MALLEABLE_BASE_IMAGE", "env/debian:12")
    assert images.ensure_base(docker) == "env/debian:12"
    assert docker.calls == []


def _sources(apt: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(TB / "base-image.sh"), "--print-sources", *args],
                          capture_output=True, text=True, timeout=20,
                          env={"MALLEABLE_APT_ETC": str(apt), "PATH": "/usr/bin:/bin"})


def test_base_image_script_keeps_only_the_suites_entries(tmp_path: Path) -> None:
    d = tmp_path / "sources.list.d"
    d.mkdir()
    (d / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\n\nTypes: deb\nURIs: http://other.example/x\nSuites: jammy\n"
        "Components: main\n\nTypes: deb\nURIs: http://off.example/d\nSuites: bookworm\n"
        "Enabled: no\n")
    (d / "extra.list").write_text("deb [arch=amd64] http://one.example/d bookworm-security main\n"
                                  "deb http://two.example/d bullseye main\n# deb x bookworm m\n")
    (d / "ignored.list.disabled").write_text("deb http://three.example/d bookworm main\n")
    out = _sources(tmp_path)
    assert out.returncode == 0, out.stderr
    assert "mirror.example" in out.stdout and "one.example" in out.stdout
    for absent in ("other.example", "off.example", "two.example", "three.example"):
        assert absent not in out.stdout


def test_base_image_script_fails_without_a_source(tmp_path: Path) -> None:
    out = _sources(tmp_path, "malleable-base:x", "trixie")
    assert out.returncode == 1 and "no apt source for 'trixie'" in out.stderr


def test_missing_docker_binary_is_an_external_error() -> None:
    with pytest.raises(ExternalError, match="not installed"):
        Docker("/nonexistent/docker").docker_cmd("info")


def test_another_version_builds_on_its_suites_base_without_oar() -> None:
    docker = _Images({})
    tag = images.ensure_image(docker, slurm="24.11")
    script = next(c for c in docker.calls if c[0] == "bash")
    assert script[2:] == ("malleable-base:trixie", "trixie")
    wanted = images.context_hash(TB, images.package_dir(), "malleable-base:trixie", "24.11")
    assert tag == f"{images.REPO}:{wanted}"
    build = next(c for c in docker.calls if "build" in c)
    assert "BASE_IMAGE=malleable-base:trixie" in build and "WITH_OAR=no" in build
    assert f"{images.REPO}:slurm-24.11" in build and images.IMAGE not in build


def test_the_default_version_keeps_oar_and_latest() -> None:
    docker = _Images({"debian:bookworm": {"id": "sha256:b"}})
    images.ensure_image(docker)
    build = next(c for c in docker.calls if "build" in c)
    assert "WITH_OAR=yes" in build and images.IMAGE in build


def test_versions_hash_apart_and_a_present_public_base_is_used(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = images.package_dir()
    hashes = {images.context_hash(TB, pkg, "sha256:x", v) for v in ("22.05", "24.11", "26.05")}
    assert len(hashes) == 3
    monkeypatch.setenv("MALLEABLE_BASE_IMAGE", "env/debian:12")  # a bookworm image: not for sid
    docker = _Images({"debian:sid": {"id": "sha256:sid"}})
    assert images.ensure_base(docker, slurm="26.05") == "debian:sid"
    assert not any(c[0] == "bash" for c in docker.calls)


def test_base_image_script_substitutes_the_hosts_suite(tmp_path: Path) -> None:
    d = tmp_path / "sources.list.d"
    d.mkdir()
    (d / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\n\nTypes: deb\nURIs: http://sec.example/d\nSuites: bookworm-security\n"
        "Components: main\n")
    (d / "extra.list").write_text("deb http://one.example/d bookworm main\n"
                                  "deb http://one.example/d bookworm-security main\n")
    release = tmp_path / "os-release"
    release.write_text("VERSION_CODENAME=bookworm\n")
    out = subprocess.run(["bash", str(TB / "base-image.sh"), "--print-sources", "x", "sid"],
                         capture_output=True, text=True, timeout=20,
                         env={"MALLEABLE_APT_ETC": str(tmp_path), "PATH": "/usr/bin:/bin",
                              "MALLEABLE_OS_RELEASE": str(release)})
    assert out.returncode == 0, out.stderr
    assert "URIs: http://mirror.example/debian\nSuites: sid\n" in out.stdout
    assert "deb http://one.example/d sid main" in out.stdout
    assert "sec.example" not in out.stdout and "bookworm" not in out.stdout
