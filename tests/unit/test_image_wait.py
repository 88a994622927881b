"""Waiting for another process's image build (``.ci/run``: the images build beside the tests).

:func:`images.wait_for_build` reads the status files ``.ci/testbed-setup.sh images`` writes
(tests/unit/test_ci_scripts.py checks the writer); :func:`images.ensure_image` waits there
before it would build, and never builds a version that build is still making.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from malleable.errors import ExternalError
from malleable.testbed import images
from tests.unit.test_testbed_images import TB, _Images


class _Clock:
    """A fake clock: ``sleep`` advances it and runs what is due at that time."""

    def __init__(self, events: dict[float, list[tuple[Path, str]]] | None = None) -> None:
        self.now = 0.0
        self.events = events or {}
        self.sleeps = 0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.now += seconds
        for at in sorted(self.events):
            if at <= self.now:
                for path, text in self.events.pop(at):
                    path.write_text(text)


def _plan(tmp_path: Path, *versions: str) -> Path:
    (tmp_path / "plan").write_text("".join(f"{v}\n" for v in versions))
    return tmp_path


def test_no_plan_or_a_version_not_in_it_means_nothing_to_wait_for(tmp_path: Path) -> None:
    clock = _Clock()
    assert images.wait_for_build(tmp_path, "22.05", clock=clock, sleep=clock.sleep) is False
    _plan(tmp_path, "22.05")
    assert images.wait_for_build(tmp_path, "24.11", clock=clock, sleep=clock.sleep) is False
    assert clock.sleeps == 0


def test_waits_until_its_version_is_built(tmp_path: Path) -> None:
    _plan(tmp_path, "22.05", "24.11")
    (tmp_path / "22.05.status").write_text("0\n")
    clock = _Clock({30.0: [(tmp_path / "24.11.status", "0\n")]})
    assert images.wait_for_build(tmp_path, "24.11", poll=2.0, clock=clock,
                                 sleep=clock.sleep) is True
    assert clock.now == 30.0  # returned at the first poll that saw the status


def test_a_failed_build_names_the_image_and_its_log(tmp_path: Path) -> None:
    _plan(tmp_path, "22.05", "24.11")
    (tmp_path / "24.11.status").write_text("7\n")
    with pytest.raises(ExternalError) as err:
        images.wait_for_build(tmp_path, "24.11")
    assert str(err.value) == (f"the Slurm 24.11 testbed image failed to build (exit status 7) "
                              f"in the build the tests wait for: see its log "
                              f"{tmp_path / '24.11.log'}")


def test_a_builder_that_ended_without_the_image_fails_at_once(tmp_path: Path) -> None:
    _plan(tmp_path, "22.05", "24.11")
    clock = _Clock({4.0: [(tmp_path / "done", "")]})
    with pytest.raises(ExternalError, match=r"ended without building the Slurm 24\.11 testbed "
                                            r"image: see its log .*24\.11\.log"):
        images.wait_for_build(tmp_path, "24.11", timeout=600, clock=clock, sleep=clock.sleep)
    assert clock.now == 4.0


def test_the_wait_is_bounded(tmp_path: Path) -> None:
    _plan(tmp_path, "26.05")
    clock = _Clock()
    with pytest.raises(ExternalError, match=r"Slurm 26\.05 testbed image was not built within "
                                            r"60 s .*MALLEABLE_IMAGES_WAIT_TIMEOUT.*26\.05\.log"):
        images.wait_for_build(tmp_path, "26.05", timeout=60, poll=2.0, clock=clock,
                              sleep=clock.sleep)
    assert clock.now == 60.0


def test_ensure_image_waits_for_the_other_build_and_does_not_build_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The old ensure_image built at once: the build call would come before the status."""
    _plan(tmp_path, "22.05", "24.11")
    monkeypatch.setenv(images.WAIT_ENV, str(tmp_path))
    base_id = "sha256:trixie"
    wanted = images.context_hash(TB, images.package_dir(), base_id, "24.11")
    tag = f"{images.REPO}:{wanted}"
    docker = _Images({"debian:trixie": {"id": base_id}})
    built: list[float] = []

    def the_other_build() -> None:  # what .ci/testbed-setup.sh does, 0.6 s later
        time.sleep(0.6)
        docker.present[tag] = {"id": "sha256:img", "label": wanted}
        built.append(time.monotonic())
        (tmp_path / "24.11.status").write_text("0\n")

    monkeypatch.setattr(images, "WAIT_POLL", 0.05)
    other = threading.Thread(target=the_other_build)
    other.start()
    try:
        assert images.ensure_image(docker, slurm="24.11") == tag
    finally:
        other.join()
    assert built, "ensure_image returned before the other build was done"
    assert not any("build" in c for c in docker.calls)


def test_ensure_image_fails_naming_the_log_when_the_other_build_failed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _plan(tmp_path, "22.05")
    (tmp_path / "22.05.status").write_text("1\n")
    monkeypatch.setenv(images.WAIT_ENV, str(tmp_path))
    docker = _Images({"debian:bookworm": {"id": "sha256:b"}})
    with pytest.raises(ExternalError, match=r"Slurm 22\.05 testbed image failed to build"):
        images.ensure_image(docker)
    assert not any("build" in c for c in docker.calls)


@pytest.mark.parametrize("raw", ["soon", "nan", "inf", "-1", "0"])
def test_a_bad_timeout_in_the_environment_is_refused(tmp_path: Path, raw: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(images.WAIT_ENV, str(_plan(tmp_path, "22.05")))
    monkeypatch.setenv(images.WAIT_TIMEOUT_ENV, raw)
    with pytest.raises(ExternalError, match=f"MALLEABLE_IMAGES_WAIT_TIMEOUT='{raw}'"):
        images.ensure_image(_Images({}))


def test_a_repository_of_ones_own_is_built_and_never_pruned(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(images.REPO_ENV, "ci9-testbed")
    docker = _Images({"debian:bookworm": {"id": "sha256:b"}})
    tag = images.ensure_image(docker)
    assert tag.startswith("ci9-testbed:")
    build = next(c for c in docker.calls if "build" in c)
    assert "ci9-testbed:latest" in build and images.IMAGE not in build
    assert not any("prune" in c for c in docker.calls)

