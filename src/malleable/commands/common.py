"""Pieces several commands share: the policy options and the summary table.

Not a command itself (the CLI registers none from here), so no command imports another.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from malleable.policies.koala import Approach
from malleable.policies.registry import PolicySpec, parse_options

#: The variable numpy's bundled OpenBLAS reads, once, when it loads.
BLAS_THREADS = "OPENBLAS_NUM_THREADS"


def load_numpy() -> None:
    """Import numpy, if it is not yet, with one OpenBLAS thread, then give the variable back.

    No command does linear algebra, but numpy's bundled OpenBLAS starts a thread per core
    when it loads, and the threads spin a while before they sleep: about 0.05 s of CPU a
    command here (docs/simulate.md), a twentieth of a 100k-job simulation. The variable is
    set only while numpy loads, so the programs a command starts (sbatch, mpirun, ssh) get
    the user's environment; a value the user set is left alone."""
    if "numpy" in sys.modules or BLAS_THREADS in os.environ:
        return
    os.environ[BLAS_THREADS] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        del os.environ[BLAS_THREADS]


def add_policy_arguments(p: argparse.ArgumentParser, default: str | None = "fpsma") -> None:
    """``--policy``, ``--policy-option`` (repeatable) and ``--approach`` (KOALA's)."""
    p.add_argument("--policy", metavar="NAME", default=None,
                   help="a policy of `malleable policies list` (fpsma, egs, equipartition, "
                        "fcfs, easy, dmr, easy-dmr, acds or a plug-in; default: "
                        f"{default or 'the config`s [policy], else fpsma'})")
    p.add_argument("--policy-option", action="append", default=[], metavar="KEY=VALUE",
                   dest="policy_options",
                   help="an option of the policy (repeatable; the value is read as TOML, e.g. "
                        "quantum=60 or levels=[\"site\"]; see docs/policies.md)")
    p.add_argument("--approach", choices=[a.value for a in Approach], default=None,
                   help="KOALA's job management approach for fpsma, egs and equipartition: "
                        "shorthand for --policy-option approach=... (default: pra)")


def policy_from_args(args: argparse.Namespace, configured: PolicySpec | None = None,
                     source: str | None = None) -> PolicySpec:
    """The checked policy spec of a command line (over a config's ``[policy]``)."""
    from malleable.service import choose_policy

    return choose_policy(configured, args.policy, parse_options(args.policy_options),
                         args.approach, source)


def _cell(value: object) -> str:
    """A summary value as the table shows it: a mean over no job (NaN) is "-"."""
    if isinstance(value, float):
        return "-" if value != value else f"{value:,.2f}"
    return str(value)


def print_summary(summary: dict[str, Any]) -> None:
    """A summary as a table titled with its workload, approach and policy."""
    from rich.console import Console  # only when printed: `simulate --json` never loads rich
    from rich.table import Table

    title = " · ".join(str(summary[k]) for k in ("workload", "approach", "policy")
                       if summary.get(k) is not None)
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in summary.items():
        if key in ("workload", "approach", "policy") or isinstance(value, dict | list):
            continue
        table.add_row(key, _cell(value))
    Console().print(table)
