"""Docs and reports name no paper file by a path that is not in the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted([*ROOT.glob("docs/*.md"), ROOT / "README.md",
                *ROOT.glob("src/malleable/experiments/**/*.py")])
PAPER = re.compile(r"[\w./-]*(?:papers?/[\w./-]+|[\w-]+\.(?:pdf|txt))")


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_paper_file_named_exists(path: Path) -> None:
    for name in PAPER.findall(path.read_text(encoding="utf-8")):
        if name.endswith((".pdf", ".txt")) or "papers/" in name:
            candidates = [(ROOT / name.lstrip("/")).resolve(), (path.parent / name).resolve()]
            assert any(c.is_relative_to(ROOT) and c.exists() for c in candidates), (
                f"{path.name} names {name}, which is not in the repository")
