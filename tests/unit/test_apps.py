"""The application catalog: built-ins, DMRlib's curves, plug-ins, and what it says when lost."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

import malleable.apps as apps
from malleable.apps import AppCatalog, AppModel, standard_catalog
from malleable.model import JobKind, JobSpec, SizeRule

SRC = Path(__file__).resolve().parents[2] / "src"


def spec(app: str, runtime: float | None = 100.0, size: int = 4) -> JobSpec:
    return JobSpec("j", JobKind.MALLEABLE, 1, 16, size, app=app, runtime=runtime)


def test_built_ins_and_generic_models() -> None:
    catalog = standard_catalog()
    for name in ("ft", "gadget2", "fixed", "amdahl:0.1", "dmr-cg", "dmr-hpg"):
        assert catalog.known(name), name
    for name in ("amdahl:1.5", "amdahl:x", "lammps", "amdahl"):
        assert not catalog.known(name), name
    assert catalog.rule("ft") is SizeRule.POW2 and catalog.rule("gadget2") is SizeRule.ANY
    assert catalog.rule("fixed") is SizeRule.ANY
    assert catalog.time_model(spec("ft"))(2) == 120.0
    assert catalog.time_model(spec("fixed"))(16) == 100.0
    assert catalog.time_model(spec("amdahl:0.5"))(4) == pytest.approx(100.0)


def test_unknown_application_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown application 'lammps'; valid: fixed, "
                                         r"amdahl:S, ft, gadget2, dmr-cg, .*dmr-hpg"):
        standard_catalog().time_model(spec("lammps"))


def test_catalog_is_a_value() -> None:
    catalog = standard_catalog()
    assert standard_catalog() is catalog
    mine = catalog.with_models({"square": AppModel(lambda n: 1.0 * n * n)})
    assert mine.known("square") and not catalog.known("square")
    with pytest.raises(TypeError):
        catalog.models["square"] = AppModel(abs)  # type: ignore[index]
    with pytest.raises(ValueError, match="reserved"):
        AppCatalog({"fixed": AppModel(abs)})


def test_dmrlib_names_are_known_whatever_was_imported() -> None:
    code = ("from malleable.workloads.swf import parse_swf\n"
            "line = '1 0 -1 -1 4 -1 -1 4 -1 -1 1 -1 -1 -1 -1 -1 -1 -1 2 2 8 -1 1'\n"
            "(job,) = parse_swf(['; MalleableApp: 1 dmr-jacobi', line]).jobs\n"
            "import sys\n"
            "assert 'malleable.sim' not in sys.modules, sorted(sys.modules)\n"
            "assert 'malleable.workloads.dmrlib_apps' not in sys.modules\n"
            "print(job.app)\n")
    path = os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "dmr-jacobi"


def test_plug_ins_load_and_a_broken_one_is_skipped(caplog: pytest.LogCaptureFixture) -> None:
    points = (EntryPoint("ft2", "malleable.apps:ft_time", apps.GROUP),
              EntryPoint("model", "malleable.apps:BUILTIN", apps.GROUP),
              EntryPoint("broken", "no_such_module_here:curve", apps.GROUP),
              EntryPoint("ft", "malleable.apps:gadget2_time", apps.GROUP))
    # given as the installed ones would be (a compiled apps.py calls entry_points directly:
    # patching it from here would not reach plugins())
    with caplog.at_level(logging.WARNING, logger="malleable.apps"):
        found = apps.plugins(points)
    assert list(found) == ["ft2"] and found["ft2"].curve is apps.ft_time
    assert found["ft2"].rule is SizeRule.ANY
    assert "broken" in caplog.text and "model" in caplog.text and "ft (" in caplog.text
    catalog = AppCatalog({**apps.BUILTIN, **found})
    assert catalog.time_model(spec("ft2"))(2) == 120.0


def test_a_plug_in_may_declare_a_size_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(apps, "POW2_SQUARE", AppModel(lambda n: 1.0 / n, SizeRule.POW2),
                        raising=False)
    point = EntryPoint("square", "malleable.apps:POW2_SQUARE", apps.GROUP)
    assert apps.plugins([point])["square"].rule is SizeRule.POW2


def test_the_installed_entry_points_of_the_group_are_read_by_default(tmp_path: Path) -> None:
    """plugins() reads the installed entry points of its group (a distribution on the path,
    as pip would install it), and none of another group."""
    info = tmp_path / "malleable_sq_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: malleable-sq-plugin\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text("[malleable.apps]\nsq = malleable.apps:gadget2_time\n"
                                           "[other.group]\nbad = no_such_module_here:curve\n")
    code = "from malleable import apps\nprint(sorted(apps.plugins()))"
    path = os.pathsep.join([str(tmp_path), str(SRC), os.environ.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": path}, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['sq']", out.stdout + out.stderr


def test_plug_ins_are_read_only_at_the_first_name_that_is_not_built_in() -> None:
    calls: list[int] = []

    def more() -> dict[str, AppModel]:
        calls.append(1)
        return {"square": AppModel(lambda n: 1.0 * n * n), "ft": AppModel(abs)}

    catalog = AppCatalog(apps.BUILTIN, more)
    assert catalog.known("ft") and catalog.known("amdahl:0.5") and catalog.known("fixed")
    assert catalog.time_model(spec("gadget2"))(2) == 600.0
    assert catalog.rule("ft") is SizeRule.POW2
    assert calls == []
    assert catalog.known("square") and catalog.time_model(spec("square"))(3) == 9.0
    assert catalog.time_model(spec("ft"))(2) == 120.0  # a built-in wins over a plug-in
    assert not catalog.known("lammps")
    assert calls == [1]
    assert "square" in catalog.names()


def test_a_simulation_of_built_in_applications_reads_no_entry_point() -> None:
    code = ("import sys\n"
            "from malleable.model import DAS3\n"
            "from malleable.policies.koala import KoalaPolicy\n"
            "from malleable.sim.run import simulate\n"
            "from malleable.workloads.koala import koala_workload\n"
            "simulate(koala_workload('wm', 1), DAS3, KoalaPolicy())\n"
            "print('importlib.metadata' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(SRC)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
