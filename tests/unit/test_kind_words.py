"""Issue 35's structure checks: no branch on a site kind outside the adapter registry
(``malleable.kinds``), and no Slurm word in the OAR code of the adapters and the site
service. They read the source (nothing is imported)."""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "malleable"

#: A branch on a kind: a comparison with a kind's name, or a test of an adapter's class.
BRANCH = re.compile(r'(==|!=) *"(oar|slurm)"|"(oar|slurm)" *(==|!=)|not in \("slurm", "oar"\)'
                    r'|isinstance\([^)]*(Oar|Slurm)(Cluster|Ctl|RestCtl)\b')
#: The branches kept, and why (docs/notes/issue-35-wing3b.md).
KEPT = {
    # submitit's executor name (slurm, local, debug), not a site kind
    ("experiments/executor.py", 'if cluster == "slurm" and shutil.which("sbatch") is None:'),
    # each kind's own ``serve`` builder checks the commands it was given are its kind's
    ("site/assembly.py", "if not isinstance(ctl, SlurmCtl):"),
    ("site/assembly.py", "if not isinstance(ctl, OarCtl):"),
}


def _lines(paths: list[Path]) -> list[tuple[str, str]]:
    return [(str(p.relative_to(SRC)), line.split("#")[0].strip())
            for p in paths for line in p.read_text(encoding="utf-8").splitlines()]


def test_no_branch_on_a_kind_outside_the_registry() -> None:
    paths = [p for p in sorted(SRC.rglob("*.py")) if p.name != "kinds.py"]
    found = {(path, line) for path, line in _lines(paths) if BRANCH.search(line)}
    assert found == KEPT


def test_no_slurm_word_in_the_oar_code() -> None:
    paths = sorted((SRC / "adapters" / "oar").glob("*.py")) + sorted(
        (SRC / "site").glob("oar*.py"))
    assert [(path, line) for path, line in _lines(paths) if "slurm" in line.lower()] == []
