#!/usr/bin/env bash
# The compiled build (setup.py; docs/simulator.md, "Compiled build"): build the wheel the way
# a user would, then run the unit and simulator tests against it instead of the source tree.
# Needs mypy (a dev dependency) and a C compiler. About 35 s to build and 2-3 min of tests.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The working tree (committed or not), copied: the build writes build/ and *.egg-info.
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$work" 2>/dev/null || true
mkdir -p "$work/tree"
(cd "$work" && find . -mindepth 1 -maxdepth 1 ! -name tree -exec mv {} tree/ \;)
(cd "$work/tree" && MALLEABLE_COMPILE=1 python3 -m pip wheel -q --no-deps --no-build-isolation \
    -w "$work/wheel" .)
python3 -m zipfile -e "$work"/wheel/malleable-*.whl "$work/site"
# The tests run in the copy, whose sources get the wheel's compiled modules beside them (an
# extension module is imported before a .py of the same name), so that the tests' own
# subprocesses (PYTHONPATH=src) run the compiled build too.
(cd "$work/site" && find . -name '*.so' -exec cp --parents -t "$work/tree/src" {} +)
cd "$work/tree"
PYTHONPATH=src python3 -c '
import malleable.manager as m, malleable.sim.cluster as c
assert m.__file__.endswith(".so") and c.__file__.endswith(".so"), (m.__file__, c.__file__)
print("compiled build:", m.__file__)'
python3 -m pytest -q -p no:cacheprovider tests/unit tests/sim
