"""``experiment koala --sensitivity``: the paper's mechanisms swept, alone and combined.

Every variant here turns on model options (:mod:`malleable.sim.model_options`) or the
growth threshold, alone or together, some at a higher arrival rate than the paper's.
Every level is ours, not the paper's (the paper gives none): the variants are labelled
**tuning**. For each finding of Figs. 7 and 8 (and the conclusion) the table says under
which of these conditions it holds, the paper setting first.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from malleable.experiments.koala.findings import FINDINGS, evaluate
from malleable.experiments.koala.runs import PAPER, Results, Variant
from malleable.sim.background import BackgroundSpec
from malleable.sim.model_options import ModelOptions

LOCAL_50 = BackgroundSpec(interarrival=300.0, runtime=1800.0, min_size=1, max_size=8)
FT_OPTIMUM, GADGET2_OPTIMUM = 16, 23
#: every mechanism at once (the grow hold mode at its default, ``request``)
ALL = ModelOptions(info_period=60.0, grow_latency=30.0, adapt_period=60.0,
                   ft_optimum=FT_OPTIMUM, gadget2_optimum=GADGET2_OPTIMUM)


def _v(name: str, description: str, **kwargs: Any) -> Variant:
    return Variant(name, description, tuning=True, **kwargs)


#: The sweep, each level ours (tuning): one mechanism at a time, then combinations.
SWEEP = (
    _v("threshold-80", "growth-only threshold at 80% of the platform", grow_threshold=0.8),
    _v("poll-60", "placement on the information service's snapshot, polled every 60 s",
       model=ModelOptions(info_period=60.0)),
    _v("latency-30", "grows taken up 30 s after the request, held from the request",
       model=ModelOptions(grow_latency=30.0)),
    _v("latency-30-arrival", "grows taken up 30 s after the request, held only on arrival",
       model=ModelOptions(grow_latency=30.0, grow_hold="arrival")),
    _v("adapt-60", "adaptation points every 60 s (releases and grows wait for them) and 30 s "
       "suspension per resize", model=ModelOptions(adapt_period=60.0), reconfig_cost=30.0),
    _v("u-curve", "U-shaped speedup curves, optimum FT 16, GADGET-2 23",
       model=ModelOptions(ft_optimum=FT_OPTIMUM, gadget2_optimum=GADGET2_OPTIMUM)),
    _v("adapt+local+u", "adaptation points every 60 s, 30 s suspension, local users at about "
       "50%, U-shaped curves", model=replace(ALL, info_period=0.0, grow_latency=0.0),
       reconfig_cost=30.0, background=LOCAL_50),
    _v("all", "every mechanism above (threshold 80%, poll 60 s, latency 30 s held from the "
       "request, adaptation 60 s, 30 s suspension, U curves) and local users at about 50%",
       model=ALL, grow_threshold=0.8, reconfig_cost=30.0, background=LOCAL_50),
    _v("all-x4", "all, with jobs arriving 4 times as often as in the paper", model=ALL,
       grow_threshold=0.8, reconfig_cost=30.0, background=LOCAL_50, rate=4.0),
    _v("all-x8", "all, with jobs arriving 8 times as often as in the paper", model=ALL,
       grow_threshold=0.8, reconfig_cost=30.0, background=LOCAL_50, rate=8.0),
)

SYMBOL = {"holds": "yes", "does not hold": "no"}


def score(verdict: str) -> float:
    """A verdict as the fraction of seed comparisons that hold (0.5 for an uncounted
    "partly")."""
    if verdict == "holds":
        return 1.0
    if verdict == "does not hold":
        return 0.0
    found = re.match(r"partly \((\d+)/(\d+)", verdict)
    return int(found.group(1)) / int(found.group(2)) if found else 0.5


def _short(verdict: str) -> str:
    found = re.match(r"partly \((\d+)/(\d+)", verdict)
    if found:
        return f"{found.group(1)}/{found.group(2)}"
    return SYMBOL.get(verdict, "partly")


def table(results: Results, names: list[str]) -> dict[str, dict[str, str]]:
    """finding key -> variant -> verdict."""
    outcomes = {n: evaluate(results, n) for n in names}
    return {f.key: {n: outcomes[n][f.key].verdict for n in names} for f in FINDINGS}


def conditions(row: dict[str, str]) -> str:
    """The variants under which a finding holds for every seed, paper first."""
    held = [n for n, v in row.items() if v == "holds"]
    return ", ".join(held) if held else "none of these"


def markdown(results: Results, variants: list[Variant]) -> list[str]:
    names = [v.name for v in variants]
    verdicts = table(results, names)
    lines = [
        "# KOALA: under which conditions each finding holds (`--sensitivity`)", "",
        f"Seeds {', '.join(map(str, results.seeds))}; every combination of Figs. 7 and 8 and "
        "the baseline rerun under each condition. Cells: **yes** (holds for every seed), "
        "**no** (for none), k/n (seed comparisons that hold). The paper setting comes first; "
        "every other level is **tuning** (ours, not the paper's): it shows what a mechanism "
        "can do, not what the paper measured.", "",
        "| condition | tuning | what |", "|---|---|---|",
        *[f"| {v.name} | {'tuning' if v.tuning else 'paper'} | {v.description} |"
          for v in variants],
        "", "| # | finding | " + " | ".join(names) + " | conditions under which it holds |",
        "|---|---|" + "---|" * len(names) + "---|",
    ]
    for f in FINDINGS:
        row = verdicts[f.key]
        lines.append(f"| {f.key} | {f.claim.replace('|', '/')} | "
                     + " | ".join(_short(row[n]) for n in names) + f" | {conditions(row)} |")
    return [*lines, "", "Figure: [sensitivity.png](sensitivity.png).", ""]


def draw(results: Results, variants: list[Variant], out: Path) -> Path:
    """A heat map: findings (rows) by condition (columns), the share of seeds that hold."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [v.name for v in variants]
    verdicts = table(results, names)
    grid = [[score(verdicts[f.key][n]) for n in names] for f in FINDINGS]
    fig, ax = plt.subplots(figsize=(1.0 + 0.7 * len(names), 0.35 * len(FINDINGS) + 2.0))
    image = ax.imshow(grid, cmap="RdYlGn", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(names)), labels=[n + ("*" if v.tuning else "")
                                             for n, v in zip(names, variants, strict=True)],
                  rotation=45, ha="right")
    ax.set_yticks(range(len(FINDINGS)), labels=[f.key for f in FINDINGS])
    ax.set_title("KOALA findings: share of seed comparisons that hold (* tuning)")
    fig.colorbar(image, ax=ax, fraction=0.03)
    fig.tight_layout()
    path = out / "sensitivity.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write(results: Results, out: Path) -> dict[str, Any]:
    """sensitivity.md and sensitivity.png; the verdicts for summary.json."""
    variants = [PAPER, *SWEEP]
    (out / "sensitivity.md").write_text("\n".join(markdown(results, variants)) + "\n",
                                        encoding="utf-8")
    draw(results, variants, out)
    verdicts = table(results, [v.name for v in variants])
    return {"conditions": [{"name": v.name, "tuning": v.tuning, "description": v.description}
                           for v in variants],
            "verdicts": verdicts,
            "holds_under": {k: [n for n, v in row.items() if v == "holds"]
                            for k, row in verdicts.items()}}
