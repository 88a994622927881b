"""The adapter registry (``malleable.adapters`` entry points): a third-party adapter is a
package with one entry point; a clusters config then names its kind and ``manager run``'s
assembly builds it. Here a tiny plug-in distribution is put on ``sys.path`` (a dist-info
with its entry point, as pip installs one)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from malleable import kinds
from malleable.clock import ScaledClock
from malleable.config import parse_config
from malleable.errors import InputError
from malleable.service import build_adapter
from malleable.store import RunInfo, Store

PLUGIN = '''
from malleable.kinds import AdapterKind
from malleable.model import ClusterView

class ToyCtl:
    def __init__(self, site):
        self.site = site

class ToyCluster:
    def __init__(self, site, ctl, run_id):
        self.name, self.ctl, self.run_id = site.name, ctl, run_id
        self.nodes, self.reserve = site.nodes or 4, site.reserve

    def observe(self):
        return ClusterView(self.name, self.nodes, self.nodes, self.reserve)

def commands(site):
    return ToyCtl(site)

def run_site(site, ctl, context):
    return ToyCluster(site, ctl, context.run_id)

SUBMITTED = []

def submit_copy(sub, tag, target):
    if sub.min_size > 4:
        raise ValueError("toy sites take 4 nodes at most")
    return lambda: SUBMITTED.append((target.site, tag.min_size, tag.sub)) or 41

class ToyTestbed:
    name, accounting, rest, default_image_only = "toy", False, False, False

    def services(self, site, image, name, secrets, etc, port):
        return {site.controller: {"image": image, "command": ["toy-server", site.name]}}

    def config_keys(self, ep):
        return (("toy_queue", "main"),)

TESTBED = ToyTestbed()

KIND = AdapterKind("toy", {"commands": "toyplug:commands", "run": "toyplug:run_site",
                           "submit": "toyplug:submit_copy", "testbed": "toyplug:TESTBED"})
'''


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "toyplug.py").write_text(PLUGIN)
    info = tmp_path / "toyplug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toyplug\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[malleable.adapters]\ntoy = toyplug:KIND\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("toyplug", None)


def test_a_plugin_kind_is_listed_configured_and_assembled(toy: Path, tmp_path: Path) -> None:
    assert kinds.names() == ["slurm", "oar", "toy"]
    config = parse_config({"clusters": {"lab": {"kind": "toy", "nodes": 6, "reserve": 1}}})
    site = config.sites[0]
    info = RunInfo("r1", 0.0, 1.0, "", "fpsma", "wm-prime")
    store = Store.open(tmp_path / "run.sqlite")
    adapter = build_adapter(site, ScaledClock(0.0, 1.0), info, store)
    store.close()
    view = adapter.observe()
    assert (type(adapter).__name__, view.nodes, view.reserve) == ("ToyCluster", 6, 1)
    assert adapter.run_id == "r1"
    assert type(adapter.ctl).__name__ == "ToyCtl"  # type: ignore[union-attr]


def test_a_plugin_without_a_builder_for_a_use_is_refused_by_name(toy: Path) -> None:
    from malleable.site.assembly import make_adapter

    config = parse_config({"clusters": {"lab": {"kind": "toy"}}})
    with pytest.raises(InputError, match="drives Slurm and OAR sites, not 'toy'"):
        make_adapter(config.sites[0], ScaledClock(0.0, 1.0), None, None)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="kind 'toy' cannot be used here; valid: slurm, oar"):
        kinds.builder("toy", "coorm", "CooRM")


def test_an_unknown_kind_lists_the_valid_ones() -> None:
    with pytest.raises(InputError, match="unknown kind 'pbs'; valid: slurm, oar"):
        parse_config({"clusters": {"lab": {"kind": "pbs"}}})
    with pytest.raises(InputError, match="unknown kind 'pbs'; valid: slurm, oar"):
        kinds.kind("pbs")


def test_malleable_submit_asks_the_kind_for_its_copy(toy: Path) -> None:
    """``malleable submit`` submits a copy through its kind's ``submit`` builder (no branch on
    the kind): the toy plug-in's copy, not an ``sbatch`` through the runner; every copy is
    made (checked) before any is submitted."""
    from malleable.adapters.shell import LocalRunner
    from malleable.site.submit import Submission, Target, submit_to

    class NoRun(LocalRunner):
        def run(self, *args: object, **kw: object) -> object:
            raise AssertionError("the toy kind's copy runs no command here")

    sub = Submission(2, 4, ("./app",))
    shown, ids = submit_to(sub, [Target(NoRun(), "alice", "lab", "toy")])
    import toyplug  # type: ignore[import-not-found]

    assert (shown, ids) == ("41", [41])
    assert [(site, size) for site, size, _ in toyplug.SUBMITTED] == [("lab", 2)]
    with pytest.raises(ValueError, match="4 nodes at most"):
        submit_to(Submission(5, 6, ("./app",)), [Target(NoRun(), "alice", "lab", "toy")])
    assert len(toyplug.SUBMITTED) == 1


def test_a_plugin_kind_with_a_testbed_side_is_a_testbed_site(toy: Path, tmp_path: Path) -> None:
    """A third kind's testbed is its registry entry's ``testbed`` object: a topology may
    name it, the compose file holds its services (and no accounting service: it has none),
    the clusters config its keys; a kind without a testbed side is refused."""
    from malleable.testbed.clusters import render_clusters_toml
    from malleable.testbed.compose import compose_project
    from malleable.testbed.info import SiteEndpoint
    from malleable.testbed.topology import parse_topology

    topo = parse_topology('[sites.lab]\nnodes = 2\nkind = "toy"\n')
    assert [(s.name, s.kind) for s in topo.sites] == [("lab", "toy")]
    assert not topo.has_slurm and topo.total_containers == 3
    doc = compose_project(topo, "t", "img", tmp_path)
    assert doc["services"] == {"lab-ctl": {"image": "img", "command": ["toy-server", "lab"]}}
    ep = SiteEndpoint(site="lab", slurm_cluster="", controller="lab-ctl", host="127.0.0.1",
                      port=2222, address="10.0.0.2", user="malleable", key="k",
                      known_hosts="kh", nodes=2, partition="", kind="toy")
    text = render_clusters_toml("t", [ep])
    assert 'kind = "toy"\ntoy_queue = "main"\nnodes = 2\n' in text
    with pytest.raises(InputError, match="kind must be one of slurm, oar, toy"):
        parse_topology('[sites.lab]\nnodes = 2\nkind = "pbs"\n')
