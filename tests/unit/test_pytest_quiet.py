"""Issue 40: ``python3 -m pytest`` is quiet for a user: a skipped test is counted in the
result line, not listed (main 5ad7fe8 printed 177 SKIPPED lines after it, ``-ra``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_skips_are_counted_not_listed(tmp_path: Path) -> None:
    (tmp_path / "test_skipping.py").write_text(
        "import pytest\n\n\n@pytest.mark.skip(reason='needs a testbed')\n"
        "def test_skipped() -> None:\n    pass\n\n\ndef test_passes() -> None:\n    pass\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                           "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path),
                           str(tmp_path)], capture_output=True, text=True, timeout=120,
                          check=False, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed, 1 skipped" in proc.stdout
    assert "SKIPPED" not in proc.stdout and "needs a testbed" not in proc.stdout
