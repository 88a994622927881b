"""CI's split of the suite (tests/conftest.py; README, "What CI runs"): which tests run on
their own after the workers, and which xdist group each test file belongs to."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import (
    ALONE,
    EXPECTED_SECONDS,
    NO_IMAGE_GROUPS,
    OTHER_VERSION_GROUPS,
    ci_group,
    group_order,
    runs_alone,
)

ROOT = Path(__file__).resolve().parents[2]


def test_every_alone_entry_names_a_test_file_or_folder_that_exists() -> None:
    for entry in ALONE:
        path = ROOT / entry
        assert path.is_dir() if entry.endswith("/") else path.is_file(), entry


def test_the_alone_part_is_the_das3_modules_and_the_mpi_folder() -> None:
    assert runs_alone("tests/integration/test_testbed_das3.py")
    assert runs_alone("tests/mpi/test_mpi_library.py")
    assert not runs_alone("tests/integration/test_testbed_small.py")
    assert not runs_alone("tests/mpi_other/test_x.py")  # a folder entry matches as a folder
    assert not runs_alone("tests/unit/test_ci_groups.py")


def test_a_module_is_its_own_group_and_testbed_sharing_ones_share_one() -> None:
    assert ci_group("tests/integration/test_oar_mpi.py") == "test_oar_mpi"
    assert ci_group("tests/integration/test_slurm_resize.py") == \
        ci_group("tests/integration/test_slurm_versions.py") == "slurm-matrix"
    assert ci_group("tests/contract/test_resource_manager.py") == "contract"
    assert ci_group("tests/unit/test_ci_groups.py") == ci_group("tests/sim/test_x.py") == "local"


def test_every_estimated_group_exists() -> None:
    modules = {p.stem for p in (ROOT / "tests" / "integration").glob("test_*.py")}
    for group in EXPECTED_SECONDS:
        assert group in modules | {"local", "contract", "slurm-matrix"}, group


def test_while_the_images_build_the_groups_that_need_none_start_first() -> None:
    groups = ["contract", "test_ansible", "local", "test_release", "slurm-matrix", "unknown"]
    warm = sorted(groups, key=lambda g: group_order(g, False))
    assert warm == ["contract", "test_ansible", "local", "slurm-matrix", "test_release",
                    "unknown"]  # longest first, as before
    cold = sorted(groups, key=lambda g: group_order(g, True))
    assert cold == ["test_ansible", "local", "test_release", "unknown", "contract",
                    "slurm-matrix"]
    assert set(NO_IMAGE_GROUPS) | set(OTHER_VERSION_GROUPS) <= set(EXPECTED_SECONDS)
