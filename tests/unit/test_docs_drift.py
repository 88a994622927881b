"""Issue 40 (round two): the docs drift a new user met, kept from coming back.

* docs/simulate.md's synopsis marked ``--workload`` and ``--seed`` required (both have
  defaults): every option of a documented synopsis is in brackets unless the parser
  requires it;
* docs/policies.md omitted easy-dmr's ``pooled``: every option of every built-in policy is
  named in the options table;
* setup.py cited ``docs/simulator.md``, and docs/architecture.md a design file outside the
  repository: every ``docs/NAME.md`` named in the sources and docs exists, and no doc names
  a path that climbs out of the repository (``../shared/...``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from malleable.cli import build_parser
from malleable.policies.registry import BUILTIN, factory, option_names

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([*ROOT.glob("docs/*.md"), ROOT / "README.md"])
SYNOPSES = {"simulate": ROOT / "docs" / "simulate.md"}


def _synopsis(doc: Path, command: str) -> str:
    """The first ``malleable COMMAND ...`` block of ``doc`` (continuation lines joined)."""
    text = doc.read_text(encoding="utf-8")
    block = re.search(rf"```sh\n(malleable {command} .*?)```", text, re.S)
    assert block, f"{doc.name}: no synopsis of malleable {command}"
    return block.group(1).replace("\\\n", " ")


def _unbracketed(synopsis: str) -> set[str]:
    """Options of a synopsis outside any [...]."""
    depth, outside = 0, []
    for char in synopsis:
        depth += char == "["
        outside.append(char if depth == 0 else " ")
        depth -= char == "]"
    return set(re.findall(r"--[\w-]+", "".join(outside)))


@pytest.mark.parametrize("command", sorted(SYNOPSES))
def test_a_synopsis_brackets_every_option_the_parser_does_not_require(command: str) -> None:
    parser = build_parser(command)
    sub = next(a for a in parser._actions if a.dest == "command")
    actions = sub.choices[command]._actions  # type: ignore[attr-defined]
    required = {o for a in actions if a.required for o in a.option_strings}
    synopsis = _synopsis(SYNOPSES[command], command)
    assert _unbracketed(synopsis) == required, synopsis


def test_the_bracket_check_sees_an_option_marked_required() -> None:
    assert _unbracketed("malleable simulate --workload W [--seed N] [--out DIR]") == {
        "--workload"}


def _policy_rows() -> dict[str, str]:
    """docs/policies.md's options table: each policy name of a row -> the row."""
    rows: dict[str, str] = {}
    for line in (ROOT / "docs" / "policies.md").read_text(encoding="utf-8").splitlines():
        cells = line.split("|")
        if len(cells) > 3 and "`" in cells[1]:
            for name in re.findall(r"`([\w-]+)`", cells[1]):
                rows.setdefault(name, cells[2])
    return rows


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_policies_md_names_every_option_of_a_built_in_policy(name: str) -> None:
    options = option_names(factory(name))
    rows = _policy_rows()
    assert name in rows, f"docs/policies.md's options table has no row for {name}"
    missing = [o for o in options or [] if f"`{o}`" not in rows[name]]
    assert not missing, f"docs/policies.md, {name}: options not named: {missing}"


SOURCES = sorted([ROOT / "setup.py", ROOT / "pyproject.toml", *DOCS,
                  *ROOT.glob("src/malleable/**/*.py")])


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_doc_page_named_exists(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    for name in set(re.findall(r"docs/([\w-]+\.md)", text)):
        assert (ROOT / "docs" / name).exists(), f"{path.name} names docs/{name}, not a page"


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_doc_names_a_page_outside_the_repository(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    # pages only: a doc may show example data beside the checkout (../shared/traces/)
    for name in re.findall(r"(?<![\w/.])((?:\.\./)+[\w./-]+\.md)\b", text):
        found = [t for t in ((path.parent / name).resolve(), (ROOT / name).resolve())
                 if t.is_relative_to(ROOT) and t.exists()]
        assert found, f"{path.name} names {name}, not a file of the repository"
