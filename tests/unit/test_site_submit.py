"""``malleable submit``: checked arguments, one held tagged sbatch per site."""

from __future__ import annotations

from pathlib import Path

import pytest

from malleable.adapters.shell import Result
from malleable.cli import main
from malleable.errors import ExternalError
from malleable.site import tag as tags
from malleable.site.submit import Submission, submit
from tests.fakes.scripted import RecordingRunner


def _option(argv: list[str], name: str) -> str:
    return next(a.split("=", 1)[1] for a in argv if a.startswith(f"--{name}="))


def test_one_site_prints_the_slurm_id_and_submits_held_and_tagged() -> None:
    runner = RecordingRunner()
    shown, ids = submit(Submission(2, 8, ("python3", "app.py", "a b; rm -rf /"), preferred=4,
                                   time="10:00"), runner, "alice")
    assert shown == "4242" and ids == [4242]
    [argv], [script] = runner.calls, runner.inputs
    assert argv[:3] == ["sbatch", "--parsable", "--hold"]
    assert "--nodes=4" in argv and "--time=10:00" in argv
    tag = tags.parse(_option(argv, "comment"), "alice")
    assert (tag.min_size, tag.max_size, tag.preferred, tag.mpi) == (2, 8, 4, False)
    assert tag.copies is None  # one site: nothing to wait for
    assert script == "#!/bin/sh\nexec python3 app.py 'a b; rm -rf /'\n"


def test_mpi_submits_the_runner_script_with_the_channel_agent(tmp_path: Path) -> None:
    program = tmp_path / "jacobi.py"
    program.write_text("print('jacobi')\n")
    runner = RecordingRunner()
    submit(Submission(2, 4, (str(program), "--iterations", "40"), mpi=True,
                      service="vu-ctl:7461"), runner, "alice")
    [argv], [script] = runner.calls, runner.inputs
    assert tags.parse(_option(argv, "comment"), "alice").mpi
    assert script is not None and "D=\"$HOME\"/.malleable/run/$SLURM_JOB_ID" in script
    agent = next(line for line in script.splitlines() if "malleable.site.agent" in line)
    assert "--service vu-ctl:7461" in agent and '--job "$SLURM_JOB_ID"' in agent
    assert agent.endswith("--program jacobi.py &")
    assert '--result "$D/result.json" --iterations 40' in script
    assert 'malleable-$SLURM_JOB_ID.result.json' in script and 'kill "$AGENT"' in script


@pytest.mark.parametrize(("extra", "message"), [
    ([], "--mpi needs the service's channel address"),
    (["--service", "nohost"], "--service: service address 'nohost'"),
    (["--service", "h:1", "--iface", "a b"], "--iface 'a b'"),
])
def test_bad_mpi_arguments_exit_2(extra: list[str], message: str, tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("MALLEABLE_SERVICE", raising=False)
    program = tmp_path / "app.py"
    program.write_text("")
    code = main(["submit", "--min", "1", "--max", "2", "--mpi", *extra, "--", str(program)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and len(err.splitlines()) == 1


def test_mpi_needs_a_python_program(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["submit", "--min", "1", "--max", "2", "--mpi", "--service", "h:1", "--",
                 "/bin/ls"])
    assert code == 2 and "must be a malleable.mpi Python program" in capsys.readouterr().err


def test_several_sites_share_one_submission_id() -> None:
    runner = RecordingRunner(Result(0, "77;leiden\n", ""))
    shown, ids = submit(Submission(1, 2, ("hostname",), sites=("vu", "leiden")), runner, "bob")
    subs = {tags.parse(_option(a, "comment"), "bob").sub for a in runner.calls}
    assert len(subs) == 1 and shown == f"bob:{subs.pop()}" and ids == [77, 77]
    assert [tags.parse(_option(a, "comment"), "bob").copies for a in runner.calls] == [2, 2]
    assert [_option(a, "clusters") for a in runner.calls] == ["vu", "leiden"]


def test_sbatch_refusal_is_an_external_error() -> None:
    runner = RecordingRunner(Result(1, "", "sbatch: error: Batch job submission failed: bad\n"))
    with pytest.raises(ExternalError, match="Batch job submission failed"):
        submit(Submission(1, 2, ("hostname",)), runner, "bob")


@pytest.mark.parametrize(("args", "message"), [
    (["--min", "3", "--max", "2", "--", "ls"], "--min 3 is above max 2"),
    (["--min", "0", "--max", "2", "--", "ls"], "--min must be in"),
    (["--min", "-1", "--max", "2", "--", "ls"], "--min must be in"),
    (["--min", "1", "--max", "4", "--preferred", "9", "--", "ls"], "--preferred 9 is outside"),
    (["--min", "1", "--max", "4", "--initial", "5", "--", "ls"], "--initial 5 is outside"),
    (["--min", "1", "--max", "4", "--time", "soon", "--", "ls"], "--time 'soon'"),
    (["--min", "1", "--max", "4", "--app-model", "a b", "--", "ls"], "--app-model"),
    (["--min", "1", "--max", "4", "--site", "a;b", "--", "ls"], "--site 'a;b'"),
    (["--min", "1", "--max", "4", "--site", "vu,grid,vu", "--", "ls"],
     "--site names vu more than once: one copy per site"),
    (["--min", "1", "--max", "4", "--site", ",".join(f"s{i}" for i in range(33)), "--", "ls"],
     "--site names 33 sites, at most 32"),
    (["--min", "1", "--max", "4"], "no command"),
    (["--min", "x", "--max", "4", "--", "ls"], "invalid int value"),
    (["--max", "4", "--", "ls"], "the following arguments are required: --min"),
])
def test_bad_arguments_exit_2_with_one_line(args: list[str], message: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(["submit", *args])
    except SystemExit as exit:  # argparse's own errors
        code = int(exit.code or 0)
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
