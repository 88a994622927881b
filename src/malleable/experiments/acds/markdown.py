"""The AC-DS experiment's report (report.md): paper and ours, side by side."""

from __future__ import annotations

from typing import Any

from malleable.experiments.acds.plan import Settings
from malleable.experiments.acds.report import PAPER, Verdict, verdicts

#: One sweep of the report: its label, settings and key numbers.
Regime = tuple[str, Settings, dict[str, Any]]


def regime_label(s: Settings) -> str:
    """``Table 1`` for the paper's parallelism range, else the contention regime's range."""
    p = s.params
    if p.min_parallelism == 1.0:
        return "Table 1 (A in [1, 256])"
    return f"contention (A in [{p.min_parallelism:g}, {p.max_parallelism:g}], tuning)"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _settings(s: Settings, elapsed: float) -> list[str]:
    p = s.params
    return [
        f"- levels K: {', '.join(map(str, s.levels))}; jobs: {', '.join(map(str, s.jobs))}; "
        f"{s.reps} repetitions per point; seed {s.seed}",
        f"- Figs. 7-8: K = {s.deepest}, QF in {list(s.quantum_factors)}, CF in "
        f"{list(s.fig7_costs)} (Fig. 7) and {list(s.fig8_costs)} (Fig. 8, {s.fig8_jobs} jobs)",
        f"- {p.processors} processors, average parallelism log-uniform in "
        f"[{p.min_parallelism:g}, {p.max_parallelism:g}], "
        f"Downey work scale {p.work_scale:g} L per node-second, "
        f"phases of {p.phase_length:g} L in {p.segments} segments, "
        f"{'integral' if s.integral else 'fractional'} allocation",
        f"- wall time of the sweep: {elapsed:.1f} s",
    ]


def _verdict_rows(num: dict[str, Any], s: Settings) -> list[list[str]]:
    return [[fig, finding, paper, ours, verdict if verdict == "holds" else f"**{verdict}**"]
            for fig, finding, paper, ours, verdict in verdicts(num, s)]


def _fig_sections(num: dict[str, Any], s: Settings) -> list[str]:
    from malleable.experiments.acds.figures import FILES  # matplotlib: not for --help

    lines: list[str] = []
    for fig in ("fig4", "fig5", "fig6", "fig7", "fig8"):
        lines += ["", f"### {fig.replace('fig', 'Fig. ')} ({FILES[fig]})", "",
                  f"Paper: {PAPER[fig]}", "", "```", _dump(num[fig]), "```"]
    return lines


def _dump(value: Any, indent: int = 0) -> str:
    pad = "  " * indent
    if isinstance(value, dict):
        return "\n".join(f"{pad}{k}:" + ("\n" + _dump(v, indent + 1) if isinstance(v, dict)
                                         else f" {v}") for k, v in value.items())
    return f"{pad}{value}"


def _why(num: dict[str, Any]) -> list[str]:
    d = num["diagnostics"]
    return [
        "", "## Why the numbers differ where they do", "",
        f"- In {d['share_span_bound']:.0%} of the runs (Figs. 4-6) Theorem 1's lower bound is "
        f"the span term max(r_i + l_i), in {d['share_work_bound']:.0%} the work term sum(w)/P. "
        "With Table 1's log-uniform work (ratio of about 9e5 between the largest and "
        "smallest job) and parallelism from 1, a few long, nearly sequential jobs set the "
        "makespan; raising the lowest parallelism (--min-parallelism, --contention) makes "
        "the work term bind. This does not depend on the time scale we chose.",
        "- Makespan over the lower bound: "
        + ", ".join(f"{k.split('_')[0].upper()} {v:.3f}" for k, v in d.items()
                    if k.endswith("_over_lower_bound")) + ". When the longest job decides, "
        "EQUI-EQUI, which gives that job every processor once the others are done, tracks "
        "its parallelism at once, while A-Control's desire lags one quantum behind every "
        "rise of parallelism (it uses the last quantum's average).",
        "- Longer upper-level quanta (QF > 1) leave a newly busy leaf without processors "
        "until its ancestors' quanta end, which costs AC-DS more than EQUI-EQUI here.",
        "- The paper does not give its curve formulas, how Downey's seconds map onto its "
        "1 ms quanta, nor exactly how accumulated reallocation delays act; docs/acds.md "
        "says what we chose. We did not tune any of them toward the paper's numbers.",
    ]


def paper_vs_ours(regimes: list[Regime]) -> list[str]:
    """The "paper vs ours" table: each finding, the paper's number, ours in every regime
    run (the paper's first) and the regimes in which it holds."""
    found = [verdicts(num, s) for _, s, num in regimes]
    header = ["fig", "finding (criterion)", "paper",
              *[f"ours: {label}" for label, _, _ in regimes], "conditions under which it holds"]
    rows = []
    for i, first in enumerate(found[0]):
        per = [f[i] if i < len(f) and f[i][1] == first[1] else None for f in found]
        cells = [_cell(v) for v in per]
        held = [label for (label, _, _), v in zip(regimes, per, strict=True)
                if v is not None and v[4] == "holds"]
        cond = ", ".join(held) if held else "none of the regimes run"
        rows.append([first[0], first[1], first[2], *cells,
                     cond + _bound_note(first, regimes)])
    return _table(header, rows)


def _cell(v: Verdict | None) -> str:
    if v is None:
        return "-"
    return f"{v[3]} ({v[4] if v[4] == 'holds' else '**' + v[4] + '**'})"


def _bound_note(v: Verdict, regimes: list[Regime]) -> str:
    """For Fig. 7's QF = 1 ratio: the ratio over the scenarios where each bound binds."""
    if v[0] != "fig7" or not v[1].startswith("EQUI-EQUI / AC-DS at QF = 1,"):
        return ""
    parts = []
    for label, _, num in regimes:
        d = num["diagnostics"]
        for name in ("work", "span"):
            ratio, runs = d.get(f"fig7_equi_over_acds_when_{name}_binds"), d.get(
                f"fig7_runs_{name}_binds", 0)
            if ratio is not None:
                parts.append(f"{label}, {name} term binds: {ratio:.3f} ({runs} runs)")
    return "; by binding term: " + "; ".join(parts) if parts else ""


def _bounds(regimes: list[Regime]) -> list[str]:
    header = ["regime", "span term binds", "work term binds", "light load: span / work",
              "heavy load: span / work", "AC-DS, AG-DS, EQUI-EQUI makespan / bound"]
    rows = []
    for label, _, num in regimes:
        d = num["diagnostics"]
        rows.append([label, f"{d['share_span_bound']:.0%}", f"{d['share_work_bound']:.0%}",
                     f"{d['share_span_bound_light']:.0%} / {d['share_work_bound_light']:.0%}",
                     f"{d['share_span_bound_heavy']:.0%} / {d['share_work_bound_heavy']:.0%}",
                     ", ".join(f"{d[f'{a}_makespan_over_lower_bound']:.3f}"
                               for a in ("acds", "agds", "equi"))])
    return ["", "## Which lower bound binds", "",
            "Theorem 1's lower bound is max(max_i r_i + l_i, sum(w)/P): the span term or the "
            "work term. Fractions of the runs of Figs. 4-6 (one per scenario):", "",
            *_table(header, rows)]


def markdown(num: dict[str, Any], s: Settings, elapsed: float,
             others: list[Regime] | None = None) -> str:
    """The whole report; ``others`` are further regimes run beside the main one."""
    regimes: list[Regime] = [(regime_label(s), s, num), *(others or [])]
    lines = ["# AC-DS, AG-DS and EQUI-EQUI over scheduler trees: paper vs ours", "",
             "Reproduction of Figs. 4 to 8 of the AC-DS paper with `malleable experiment "
             "acds`.", "", "## Settings", "", *_settings(s, elapsed), "",
             "## Paper vs ours", "",
             "Every regime but Table 1's is a tuning (docs/acds.md), not the paper's setting.",
             "", *paper_vs_ours(regimes), *_bounds(regimes), "", "## Findings", "",
             *_table(["fig", "finding (criterion)", "paper", "ours", "verdict"],
                     _verdict_rows(num, s)),
             *_why(num), "", "## Key numbers per figure", *_fig_sections(num, s), ""]
    return "\n".join(lines)
