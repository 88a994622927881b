"""Issue 19's bad-input classes, tried once more against the command line as a new user would.

Runs ``python3 -m malleable`` (from this checkout's ``src``) on one or more malformed inputs
of every class the issue names and prints a table: tried, refused cleanly. "Cleanly" means the
documented exit code (2 bad input, 3 failure outside, 4 infeasible), no traceback, one line on
stderr naming the problem (``FILE:LINE: ...`` for a line of a file), and no ``--out`` left
behind. ``--quick`` tries one input per class (a smoke test). Exit status 1 if any input was
not refused cleanly.

Issue 40 added, besides the refusals: runs that must go on with a warning (``--workers``
above the cores, a job past its requested time under EASY), ``simulate --out`` saying what
it wrote (the figures included), and every command's ``--help`` loading no heavy module
(numpy, matplotlib, paramiko, the simulator ...). ``{BUSY}`` in a case is a port this script
holds while it runs; a case marked ``unprivileged`` runs as ``nobody`` (``setpriv``) when this
script runs as root, and is skipped when it cannot be.

    python3 benchmarks/first_hour_inputs.py [--quick]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOOD = "1 0 -1 300 4 -1 -1 4 600 -1 1 1 1 -1 1 -1 -1 -1"


@dataclass(frozen=True)
class Case:
    klass: str
    name: str
    argv: list[str]
    files: dict[str, bytes]
    codes: tuple[int, ...] = (2,)
    needs: str = ""  # a text stderr must contain ("{F}" stands for the first file's path)
    readonly: str = ""  # a directory (under the case's folder) made read-only first
    unprivileged: bool = False  # run as nobody when root (root writes anywhere)


def swf_line(**fields: str) -> str:
    """GOOD with some of its 18 fields replaced (by 1-based position)."""
    values = GOOD.split()
    for key, value in fields.items():
        values[int(key[1:]) - 1] = value
    return " ".join(values)


def swf(name: str, klass: str, text: str, needs: str = "{F}:") -> Case:
    return Case(klass, name, ["simulate", "--workload", "{F}", "--out", "{OUT}"],
                {"w.swf": text.encode()}, needs=needs)


def config(name: str, text: bytes | str, needs: str = "") -> Case:
    raw = text.encode() if isinstance(text, str) else text
    return Case("config", name, ["manager", "run", "--config", "{F}", "--workload", "wm",
                                 "--out", "{OUT}"],
                {"c.toml": raw, "k/id": b"", "k/known_hosts": b""}, needs=needs)


SITE = '[ssh]\nuser = "u"\nkey = "k/id"\nknown_hosts = "k/known_hosts"\n[clusters.vu]\nhost = "h"\n'


def cases() -> list[Case]:
    out: list[Case] = []
    for label, fields in [
        ("submit 1e20", {"f2": "1e20"}), ("run time 1e308", {"f4": "1e308"}),
        ("size 4.5", {"f5": "4.5", "f8": "4.5"}), ("size 0", {"f5": "0", "f8": "0"}),
        ("size -3", {"f5": "-3", "f8": "-3"}), ("run time -50", {"f4": "-50"}),
        ("submit -5", {"f2": "-5"}), ("wall time 1e12", {"f9": "1e12"}),
        ("size 1e9", {"f5": "1e9", "f8": "1e9"}), ("job number 1.5", {"f1": "1.5"}),
        ("run time nan", {"f4": "nan"}), ("size 'four'", {"f5": "four"}),
        ("user 7.5", {"f12": "7.5"}),
    ]:
        out.append(swf(label, "SWF value out of range or of the wrong kind",
                       swf_line(**fields) + "\n"))
    out.append(swf("19 fields", "SWF value out of range or of the wrong kind",
                   GOOD + " 1\n"))
    for label, text in [("empty file", ""), ("comments only", "; a comment\n;\n"),
                        ("blank lines", "\n\n  \n"), ("BOM + comment", "\ufeff; x\n")]:
        out.append(swf(label, "empty workload", text, needs="no jobs"))
    header = "; MalleableFormat: 1\n"
    for label, text, needs in [
        ("MalleableFormat 2", "; MalleableFormat: 2\n" + GOOD + "\n", "{F}:1"),
        ("MalleableApp twice", header + "; MalleableApp: 1 ft\n; MalleableApp: 1 gadget2\n"
         + GOOD + "\n", "{F}:3"),
        ("ft initial size 3", header + "; MalleableApp: 1 ft\n"
         + swf_line(f5="3", f8="3") + " 2 2 8 -1 1\n", "{F}:3: application ft runs on pow2"),
        ("amdahl:1.5 used", header + "; MalleableApp: 1 amdahl:1.5\n" + GOOD
         + " 2 2 8 -1 1\n", "{F}:2: application 'amdahl:1.5': the serial fraction must be"),
        ("amdahl:1.5 named, unused", header + "; MalleableApp: 1 amdahl:1.5\n" + GOOD + "\n",
         "{F}:2: application 'amdahl:1.5': the serial fraction must be in [0, 1]"),
        ("unknown application named", header + "; MalleableApp: 1 lammps\n" + GOOD + "\n",
         "{F}:2: unknown application 'lammps'"),
    ]:
        out.append(swf(label, "malleable-extension headers", text, needs=needs))
    for cmd in (["simulate", "--workload", "wm"], ["experiment", "dmrlib", "--quick"],
                ["experiment", "acds", "--quick"], ["experiment", "coorm", "--quick"]):
        for seed in ("-1", "1.5"):
            out.append(Case("--seed", f"{cmd[0]} {cmd[-1]} --seed {seed}",
                            [*cmd, "--seed", seed, "--out", "{OUT}"], {}, needs="--seed"))
    out.append(Case("testbed down of nothing", "testbed down --name nosuch-fh",
                    ["testbed", "down", "--name", "nosuch-fh"], {}, needs="nosuch-fh"))
    for label, raw in [("UTF-8 BOM then a bad line", "\ufeff" + swf_line(f5="4.5") + "\n"),
                       ("Latin-1 byte", "; caf\xe9\n" + GOOD + "\n")]:
        enc = "latin-1" if "Latin" in label else "utf-8"
        out.append(Case("encoding", f"workload: {label}",
                        ["simulate", "--workload", "{F}", "--out", "{OUT}"],
                        {"w.swf": raw.encode(enc)},
                        needs="{F}:1" if "BOM" in label else "not UTF-8"))
    out.append(config("config not UTF-8", b"# caf\xe9\n" + SITE.encode(), "not UTF-8"))
    out.append(config("config port 65536", SITE + "port = 65536\n", "65535"))
    out.append(config("config port 0", SITE + "port = 0\n", "65535"))
    out.append(config("config missing key", SITE.replace('"k/id"', '"k/absent"'),
                      "no such file"))
    out.append(config("config missing known_hosts",
                      SITE.replace('"k/known_hosts"', '"k/absent"'), "no such file"))
    for name, extra, needs in [
        ("koala --reps 0", ["experiment", "koala", "--reps", "0"], "--reps"),
        ("koala --seeds 0 (older spelling)", ["experiment", "koala", "--seeds", "0"], "--reps"),
        ("dmrlib --reps 0", ["experiment", "dmrlib", "--reps", "0"], "--reps"),
        ("acds --job-counts 5:1:1", ["experiment", "acds", "--job-counts", "5:1:1"],
         "--job-counts"),
        ("acds --jobs 5:1:1 (older spelling)", ["experiment", "acds", "--jobs", "5:1:1"],
         "--job-counts"),
        ("coorm --jobs-per-pack 0", ["experiment", "coorm", "--jobs-per-pack", "0"],
         "--jobs-per-pack"),
        ("coorm --workers 0", ["experiment", "coorm", "--workers", "0"], "--workers"),
        ("acds --workers 0", ["experiment", "acds", "--workers", "0"], "--workers"),
    ]:
        out.append(Case("experiment options", name, [*extra, "--out", "{OUT}"], {},
                        needs=needs))
    out.extend(round_two())
    return out


def round_two() -> list[Case]:
    """Issue 40's start-up failures, silent acceptances and unbounded loads."""
    start = "start-up failure (issue 40)"
    silent = "silent acceptance (issue 40)"
    load = "unbounded load (issue 40)"
    platform = ["simulate", "--platform", "{F}", "--out", "{OUT}"]
    return [
        Case(start, "coorm serve --port 70000", ["coorm", "serve", "--port", "70000"], {},
             needs="--port"),
        Case(start, "coorm serve --port -1", ["coorm", "serve", "--port", "-1"], {},
             needs="--port"),
        Case(start, "coorm serve --host 999.1.1.1", ["coorm", "serve", "--host", "999.1.1.1"],
             {}, needs="--host 999.1.1.1"),
        Case(start, "experiment --executor slurm off a cluster",
             ["experiment", "dmrlib", "--quick", "--executor", "slurm", "--out", "{OUT}"], {},
             codes=(3,), needs="--executor slurm"),
        Case(start, "simulate --out whose jobs.csv cannot be written",
             ["simulate", "--out", "{TMP}/o"], {"o/jobs.csv/keep": b""},
             needs="jobs.csv: cannot write"),
        Case(start, "simulate --out into a read-only existing directory",
             ["simulate", "--out", "{TMP}/ro"], {}, needs="cannot write in the output "
             "directory", readonly="ro", unprivileged=True),
        Case(start, "coorm serve --port in use", ["coorm", "serve", "--port", "{BUSY}"], {},
             codes=(3,), needs="already in use"),
        Case(start, "manager serve with its metrics port in use",
             ["manager", "serve", "--config", "{F}", "--allow-root"],
             {"m.toml": b'[service]\nstate = "s/state.sqlite"\nmetrics = "127.0.0.1:{BUSY}"\n'
                        b'[policy]\nname = "fpsma"\n[clusters.nowhere]\ncommand_timeout = 5\n'},
             needs="cannot listen on 127.0.0.1:{BUSY}"),
        Case(start, "--platform TOML with reserve >= nodes", platform,
             {"p.toml": b"[clusters.a]\nnodes = 4\nreserve = 4\n"},
             needs="{F}: clusters.a.reserve"),
        Case(start, "manager run without the Slurm commands here",
             ["manager", "run", "--config", "{F}", "--out", "{OUT}"],
             {"c.toml": b"[clusters.a]\nnodes = 4\n"}, codes=(3,), needs="command not found"),
        Case(silent, "[policy] name = nosuch in a --platform TOML", platform,
             {"p.toml": b'[clusters.a]\nnodes = 40\n[policy]\nname = "nosuch"\n'},
             needs="nosuch"),
        Case(silent, "--approach pwa --policy-option approach=pra",
             ["simulate", "--approach", "pwa", "--policy-option", "approach=pra", "--out",
              "{OUT}"], {}, needs="disagree"),
        Case(silent, "--platform 99999999999",
             ["simulate", "--platform", "99999999999", "--out", "{OUT}"], {},
             needs="10,000,000"),
        Case(load, "simulate --background 1e-9",
             ["simulate", "--background", "1e-9", "--out", "{OUT}"], {}, needs="--background"),
        Case(load, "simulate --background 0.1",
             ["simulate", "--background", "0.1", "--out", "{OUT}"], {}, needs="--background"),
        Case(load, "coorm serve --clusters 100000", ["coorm", "serve", "--clusters", "100000"],
             {}, needs="--clusters"),
        *[Case(load, f"experiment {' '.join(argv)}", ["experiment", *argv, "--out", "{OUT}"],
               {}, needs=argv[1]) for argv in (
            ["koala", "--reps", "100000000"], ["dmrlib", "--sizes", "1000000000"],
            ["acds", "--job-counts", "20:100000000:20"],
            ["coorm", "--jobs-per-pack", "100000000"])],
    ]


AGREE = [  # (name, simulate options): outputs that must agree with each other
    ("README command", ["--workload", "wm", "--approach", "pra", "--policy", "egs"]),
    ("PWA/EGS on W'm", ["--workload", "wm-prime", "--approach", "pwa", "--policy", "egs"]),
    ("UTF-8 BOM workload accepted", ["--workload", "{BOM}"]),
    ("a job larger than every cluster is counted rejected",
     ["--workload", "{BIG}", "--platform", "128", "--policy", "fcfs"]),
]


WARN = [  # (name, argv, what a warning must say): runs that go on, bounded, and say so
    ("experiment --workers 100000 (533 processes in 20 s on main 5ad7fe8)",
     ["experiment", "coorm", "--quick", "--workers", "100000", "--json", "--out", "{OUT}"],
     "--workers 100000: using"),
    ("a job past its requested time under EASY",
     ["simulate", "--workload", "{F}", "--platform", "128", "--policy", "easy", "--json",
      "--out", "{OUT}"], "ran past their requested time"),
]


def warned(argv: list[str], needs: str, tmp: Path) -> tuple[bool, str]:
    """The run ends (exit 0) and a ``malleable: warning:`` line says ``needs``."""
    trace = tmp / "w.swf"
    trace.write_text(swf_line(f4="900", f9="600") + "\n")  # ran 900 s of its 600 requested
    argv = [a.replace("{F}", str(trace)).replace("{OUT}", str(tmp / "out")) for a in argv]
    # its own process group, killed whole on a timeout: on main 5ad7fe8 the --workers case
    # forks thousands of pool processes that would outlive their parent
    proc = subprocess.Popen([sys.executable, "-m", "malleable", *argv], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
                            start_new_session=True)
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return False, "still running after 120 s (killed)"
    said = [line for line in err.splitlines()
            if line.startswith("malleable: warning:") and needs in line]
    ok = proc.returncode == 0 and len(said) == 1 and "Traceback" not in err
    return ok, f"exit {proc.returncode}; " + (said[0] if said else f"no warning {needs!r}")


HEAVY = ("numpy", "matplotlib", "paramiko", "cryptography", "prometheus_client", "docker",
         "malleable.sim", "concurrent.futures", "submitit")
_LEAVES = """
import argparse, json
from malleable.cli import build_parser
def leaves(p, prefix=()):
    subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [list(prefix)]
    return [leaf for name, c in subs[0].choices.items() for leaf in leaves(c, (*prefix, name))]
print(json.dumps(leaves(build_parser())))
"""
_LOADED = ("import sys\nfrom malleable.cli import main\ntry:\n    main(sys.argv[1:])\n"
           "except SystemExit:\n    pass\n"
           f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")


def help_commands() -> list[list[str]]:
    """Every leaf command of the parser (``experiment koala``, ``manager serve`` ...)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", _LEAVES], capture_output=True, text=True,
                          env=env, timeout=60, check=True)
    found: list[list[str]] = json.loads(done.stdout)
    return [[], *found]


def help_is_light(argv: list[str]) -> tuple[bool, str]:
    """``malleable ARGV --help`` prints its usage and loads none of :data:`HEAVY`."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", _LOADED, *argv, "--help"],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    loaded = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "?"
    ok = "usage: malleable" in done.stdout and loaded == "[]"
    return ok, f"loaded {loaded}"


def agree(name: str, options: list[str], tmp: Path) -> tuple[bool, str]:
    """jobs.csv's resizes sum to the summary's grow + shrink operations, its floats carry no
    noise (at most 6 decimals), and the run exits 0."""
    bom = tmp / "bom.swf"
    bom.write_text("\ufeff; a comment\n" + GOOD + "\n", encoding="utf-8")
    big = tmp / "big.swf"
    big.write_text(swf_line(f5="500", f8="500") + "\n" + swf_line(f1="2") + "\n")
    out = tmp / "out"
    argv = ["simulate", *[o.replace("{BOM}", str(bom)).replace("{BIG}", str(big))
                          for o in options], "--out", str(out), "--json"]
    proc = subprocess.run([sys.executable, "-m", "malleable", *argv], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
                          timeout=300, check=False)
    if proc.returncode != 0:
        return False, f"exit {proc.returncode}: {proc.stderr.strip()[:200]}"
    summary = json.loads(proc.stdout)
    with (out / "jobs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    resizes = sum(int(r["resizes"]) for r in rows)
    ops = summary["grow_ops"] + summary["shrink_ops"]
    noisy = [v for r in rows for v in r.values() if "." in v and len(v.split(".")[1]) > 6]
    # every job ended or was refused, and the summary says which (issue 40)
    ended = summary["completed"] + summary.get("rejected", 0) == summary["jobs"]
    # and it says what it wrote, the run's figures included (issue 40)
    files = [out / n for n in ("jobs.csv", "summary.json", "usage.png", "gantt.png")]
    wrote = f"malleable: wrote {', '.join(map(str, files))}" in proc.stderr.splitlines()
    ok = (resizes == ops and not noisy and len(rows) == summary["jobs"] and ended and wrote
          and all(f.exists() for f in files))
    return ok, (f"resizes column {resizes}, grow+shrink {ops}, noisy cells {len(noisy)}, "
                f"completed {summary['completed']} + rejected {summary.get('rejected')} of "
                f"{summary['jobs']}, {'said' if wrote else 'did not say'} what it wrote")


def _nobody() -> list[str] | None:
    """The prefix that runs a command as nobody ([] when not root; None when impossible)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        return None
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def run_case(case: Case, tmp: Path) -> tuple[bool, str]:
    with socket.create_server(("127.0.0.1", 0)) as busy:  # the port {BUSY} stands for
        return _run_case(case, tmp, str(busy.getsockname()[1]))


def _run_case(case: Case, tmp: Path, port: str) -> tuple[bool, str]:
    for name, data in case.files.items():
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_bytes(data.replace(b"{BUSY}", port.encode()))
    prefix = _nobody() if case.unprivileged else []
    if prefix is None:
        return True, "skipped: root without setpriv"
    if case.readonly:
        tmp.chmod(0o755)  # nobody must reach it
        (tmp / case.readonly).mkdir()
        (tmp / case.readonly).chmod(0o555)
    first = str(tmp / next(iter(case.files))) if case.files else ""
    out = tmp / "out"
    argv = [a.replace("{F}", first).replace("{OUT}", str(out)).replace("{TMP}", str(tmp))
            .replace("{BUSY}", port) for a in case.argv]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([*prefix, sys.executable, "-m", "malleable", *argv],
                          capture_output=True, text=True, env=env, timeout=120, cwd=tmp,
                          check=False)
    err = proc.stderr.strip()
    problems = []
    if proc.returncode not in case.codes:
        problems.append(f"exit {proc.returncode}")
    if "Traceback" in proc.stderr:
        problems.append("traceback")
    if len(err.splitlines()) != 1:
        problems.append(f"{len(err.splitlines())} lines on stderr")
    needs = case.needs.replace("{F}", first).replace("{BUSY}", port)
    if needs and needs not in err:
        problems.append(f"no {needs!r}")
    if out.exists():
        problems.append("--out left behind")
    return not problems, "; ".join(problems) or err.replace(str(tmp) + "/", "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one input per class")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every input")
    args = parser.parse_args(argv)
    todo = cases()
    if args.quick:
        todo = list({c.klass: c for c in reversed(todo)}.values())
    table: dict[str, list[int]] = {}
    bad = 0
    for case in todo:
        with tempfile.TemporaryDirectory() as tmp:
            clean, detail = run_case(case, Path(tmp))
        row = table.setdefault(case.klass, [0, 0])
        row[0] += 1
        row[1] += clean
        bad += not clean
        if args.verbose or not clean:
            print(f"{'ok ' if clean else 'BAD'} {case.name}: {detail}")
    for name, options in AGREE[:1] if args.quick else AGREE:
        with tempfile.TemporaryDirectory() as tmp:
            clean, detail = agree(name, options, Path(tmp))
        row = table.setdefault("outputs agree (not refused: must run)", [0, 0])
        row[0] += 1
        row[1] += clean
        bad += not clean
        if args.verbose or not clean:
            print(f"{'ok ' if clean else 'BAD'} {name}: {detail}")
    for name, argv, needs in WARN[:1] if args.quick else WARN:
        with tempfile.TemporaryDirectory() as tmp:
            clean, detail = warned(argv, needs, Path(tmp))
        bad += _count(table, "bounded or warned, and ran (issue 40)", clean)
        if args.verbose or not clean:
            print(f"{'ok ' if clean else 'BAD'} {name}: {detail}")
    for argv in help_commands()[:2] if args.quick else help_commands():
        clean, detail = help_is_light(argv)
        bad += _count(table, "--help loads nothing heavy (issue 40)", clean)
        if args.verbose or not clean:
            print(f"{'ok ' if clean else 'BAD'} malleable {' '.join(argv)} --help: {detail}")
    print("| class | tried | refused cleanly |\n|---|---|---|")
    for klass, (tried, clean) in table.items():
        print(f"| {klass} | {tried} | {clean} |")
    total = sum(t for t, _ in table.values())
    print(f"| **total** | {total} | {total - bad} |")
    return 1 if bad else 0


def _count(table: dict[str, list[int]], klass: str, clean: bool) -> int:
    """Count one input of ``klass`` in ``table``; 1 when it was not handled cleanly."""
    row = table.setdefault(klass, [0, 0])
    row[0] += 1
    row[1] += clean
    return int(not clean)


if __name__ == "__main__":
    sys.exit(main())
