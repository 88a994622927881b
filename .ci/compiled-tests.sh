#!/usr/bin/env bash
# The compiled build (setup.py; docs/simulate.md, "Compiled build"): build the wheel the way a
# user would (benchmarks/compiled.py), then run the unit and simulator tests against it.
# Needs mypy and wheel (the dev extra) and a C compiler. About 35 s to build, 3 min of tests.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tree=$(python3 benchmarks/compiled.py "$work")
cd "$tree"
PYTHONPATH=src python3 -c '
import malleable.manager as m, malleable.sim.cluster as c
assert m.__file__.endswith(".so") and c.__file__.endswith(".so"), (m.__file__, c.__file__)
print("compiled build:", m.__file__)'
python3 -m pytest -q -p no:cacheprovider tests/unit tests/sim
