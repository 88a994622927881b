"""Topologies: built-ins, scaling, and TOML files with every kind of mistake."""

from __future__ import annotations

from pathlib import Path

import pytest

from malleable.errors import InputError
from malleable.model import DAS3 as MODEL_DAS3
from malleable.testbed.topology import DAS3, SMALL, Site, load_topology, parse_topology


def test_das3_matches_the_simulated_clusters() -> None:
    assert [(s.name, s.nodes) for s in DAS3.sites] == [(c.name, c.nodes) for c in MODEL_DAS3]
    assert DAS3.total_nodes == 272
    assert all(s.containers >= 2 for s in DAS3.sites)


def test_small_is_two_sites_of_four_nodes_in_two_containers() -> None:
    assert [(s.name, s.nodes, s.containers) for s in SMALL.sites] == [("vu", 4, 2), ("uva", 4, 2)]


def test_layout_spreads_nodes_evenly_in_order() -> None:
    site = Site("alpha", 5, 2)
    assert site.layout() == {"alpha-c0": ["alpha-n001", "alpha-n002", "alpha-n003"],
                             "alpha-c1": ["alpha-n004", "alpha-n005"]}
    assert site.controller == "alpha-ctl"


def test_node_names_widen_past_999() -> None:
    assert Site("big", 1000, 2).node_names()[-1] == "big-n1000"
    assert Site("big", 1000, 2).node_names()[0] == "big-n0001"


def test_scale_rounds_and_keeps_at_least_one_node() -> None:
    scaled = DAS3.scaled(0.1)
    assert [s.nodes for s in scaled.sites] == [8, 4, 7, 5, 3]
    tiny = DAS3.scaled(0.001)
    assert [(s.nodes, s.containers) for s in tiny.sites] == [(1, 1)] * 5
    assert DAS3.scaled(1.0) is DAS3


@pytest.mark.parametrize("factor", [0.0, -1.0, 1.5, float("nan"), float("inf")])
def test_bad_scale_is_an_input_error(factor: float) -> None:
    with pytest.raises(InputError, match="--scale"):
        DAS3.scaled(factor)


def test_parse_a_topology_file() -> None:
    topo = parse_topology('name = "lab"\n[sites.alpha]\nnodes = 6\ncontainers = 3\n'
                          '[sites.beta]\nnodes = 2\n')
    assert topo.name == "lab"
    assert topo.sites == (Site("alpha", 6, 3), Site("beta", 2, 2))


@pytest.mark.parametrize(("text", "message"), [
    ("[sites.alpha\nnodes = 4", "not valid TOML"),
    ("", "no sites"),
    ("[sites]\n", "no sites"),
    ("colour = 1\n[sites.a]\nnodes = 1", "unknown key.*colour.*valid keys: name, sites"),
    ("[sites.a]\nnodes = 4\ncpus = 2", r"unknown key.*cpus.*\[sites.a\].*nodes, containers"),
    ("[sites.a]\ncontainers = 2", r"\[sites.a\]: missing 'nodes = N'"),
    ("[sites.a]\nnodes = 0", "nodes must be an integer from 1 to 1000, got 0"),
    ("[sites.a]\nnodes = 2.5", "nodes must be an integer"),
    ("[sites.a]\nnodes = true", "nodes must be an integer"),
    ("[sites.a]\nnodes = 4\ncontainers = 0", "containers must be an integer from 1 to 32"),
    ("[sites.a]\nnodes = 2\ncontainers = 3", "3 containers for 2 nodes"),
    ("[sites.Alpha]\nnodes = 2", "lowercase letters and digits"),
    ("[sites.a-b]\nnodes = 2", "lowercase letters and digits"),
    ("sites = 3", "no sites"),
    ("[sites]\na = 3", r"\[sites.a\] must be a table"),
    ("name = 3\n[sites.a]\nnodes = 1", "'name' must be a non-empty string"),
])
def test_bad_topology_files_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as info:
        parse_topology(text, source="t.toml")
    assert str(info.value).startswith("t.toml: ")


def test_load_builtin_file_and_missing(tmp_path: Path) -> None:
    assert load_topology("das3") is DAS3
    path = tmp_path / "two.toml"
    path.write_text("[sites.x]\nnodes = 3\n")
    topo = load_topology(str(path))
    assert topo.name == "two" and topo.sites == (Site("x", 3, 2),)
    with pytest.raises(InputError, match="neither a built-in"):
        load_topology(str(tmp_path / "missing.toml"))


def test_site_lookup_names_the_sites() -> None:
    assert SMALL.site("uva").nodes == 4
    with pytest.raises(InputError, match="sites: vu, uva"):
        SMALL.site("delft")
