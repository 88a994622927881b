"""``malleable submit``: checked arguments, one held tagged sbatch per site."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from malleable.adapters.shell import Result
from malleable.cli import main
from malleable.errors import ExternalError
from malleable.site import tag as tags
from malleable.site.submit import Submission, submit

ACCEPTED = Result(0, "4242\n", "")


class Recorder:
    def __init__(self, answer: Result = ACCEPTED) -> None:
        self.calls: list[tuple[list[str], str | None]] = []
        self.answer = answer

    def run(self, argv: Sequence[str], timeout: float, *, input: str | None = None,
            check: bool = True) -> Result:
        self.calls.append((list(argv), input))
        return self.answer

    def close(self) -> None:
        pass


def _option(argv: list[str], name: str) -> str:
    return next(a.split("=", 1)[1] for a in argv if a.startswith(f"--{name}="))


def test_one_site_prints_the_slurm_id_and_submits_held_and_tagged() -> None:
    runner = Recorder()
    shown, ids = submit(Submission(2, 8, ("python3", "app.py", "a b; rm -rf /"), preferred=4,
                                   time="10:00", mpi=True), runner, "alice")
    assert shown == "4242" and ids == [4242]
    [(argv, script)] = runner.calls
    assert argv[:3] == ["sbatch", "--parsable", "--hold"]
    assert "--nodes=4" in argv and "--time=10:00" in argv
    tag = tags.parse(_option(argv, "comment"), "alice")
    assert (tag.min_size, tag.max_size, tag.preferred, tag.mpi) == (2, 8, 4, True)
    assert script == "#!/bin/sh\nexec python3 app.py 'a b; rm -rf /'\n"


def test_several_sites_share_one_submission_id() -> None:
    runner = Recorder(Result(0, "77;leiden\n", ""))
    shown, ids = submit(Submission(1, 2, ("hostname",), sites=("vu", "leiden")), runner, "bob")
    subs = {tags.parse(_option(a, "comment"), "bob").sub for a, _ in runner.calls}
    assert len(subs) == 1 and shown == f"bob:{subs.pop()}" and ids == [77, 77]
    assert [_option(a, "clusters") for a, _ in runner.calls] == ["vu", "leiden"]


def test_sbatch_refusal_is_an_external_error() -> None:
    runner = Recorder(Result(1, "", "sbatch: error: Batch job submission failed: bad\n"))
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
