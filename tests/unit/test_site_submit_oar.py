"""``malleable submit`` to OAR sites: ``oarsub --hold`` with the compact tag as the job's
name, on the fake OAR site (tests/fakes/oar.py); the clusters config choosing the kind."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from malleable.adapters.shell import CommandRunner
from malleable.cli import main
from malleable.config import SiteConfig, load_config
from malleable.errors import ExternalError, InputError
from malleable.site import tag as tags
from malleable.site.submit import Submission, Target, oar_command, oar_walltime, submit_to
from tests.fakes.oar import FakeOar
from tests.fakes.scripted import RecordingRunner


def _grid(user: str = "alice") -> FakeOar:
    return FakeOar([f"grid-n{i}" for i in range(1, 5)], user=user)


def _oar(fake: FakeOar, user: str = "alice", site: str = "grid") -> Target:
    return Target(fake, user, site, "oar", clusters=False)


def test_a_held_job_named_with_the_compact_tag_owned_by_the_user() -> None:
    fake = _grid()
    shown, ids = submit_to(Submission(2, 8, ("python3", "app.py", "a b; rm -rf /"), preferred=3,
                                      time="10:00", app="jacobi"), [_oar(fake)])
    assert shown == "1" and ids == [1]
    [argv] = fake.calls
    name = argv[argv.index("-n") + 1]
    assert argv[:3] == ["oarsub", "-J", "--hold"]
    assert argv[-7:] == ["-l", "nodes=3,walltime=0:10:00", "-O", "OAR.%jobid%.stdout", "-E",
                         "OAR.%jobid%.stderr", "python3 app.py 'a b; rm -rf /'"]
    job = fake.jobs[1]
    assert (job.state, job.owner, job.want) == ("Hold", "alice", 3)
    tag = tags.parse_oar(name)
    assert (tag.min_size, tag.max_size, tag.preferred, tag.app, tag.mpi) == (2, 8, 3, "jacobi",
                                                                              False)
    assert tag.sub is not None and tags.SUB_ID.fullmatch(tag.sub)
    assert tag.copies is None and ";n=" not in name


def test_the_held_job_shows_held_and_tagged_in_oarstat_and_never_starts() -> None:
    fake = _grid("bob")
    submit_to(Submission(1, 4, ("hostname",)), [_oar(fake, "bob")])
    for _ in range(3):  # the fake schedules at every command
        fake.run(["oarstat", "-fJ", "-j", "1"], 10)
    doc = json.loads(fake.run(["oarstat", "-fJ", "-j", "1"], 10).stdout)["1"]
    assert (doc["state"], doc["owner"]) == ("Hold", "bob")
    assert tags.parse_oar(doc["name"]).max_size == 4
    assert "walltime" not in " ".join(fake.calls[0])  # no --time: OAR's default walltime
    fake.run(["oarresume", "1"], 10)  # what the service will do, as oar
    assert fake.jobs[1].state == "Running" and fake.jobs[1].nodes == ["grid-n1"]


@pytest.mark.parametrize(("limit", "walltime"), [
    ("10", "0:10:00"), ("90", "1:30:00"), ("5:30", "0:05:30"), ("2:00:00", "2:00:00"),
    ("1-2", "26:00:00"), ("1-02:30", "26:30:00"), ("1-0:0:5", "24:00:05"),
    ("0:75:0", "1:15:00"),
])
def test_slurm_time_limits_become_oar_walltimes(limit: str, walltime: str) -> None:
    assert oar_walltime(limit) == walltime


def test_a_name_over_100_characters_is_refused_before_anything_is_submitted() -> None:
    slurm, fake = RecordingRunner(), _grid()
    targets = [Target(slurm, "alice", "vu"), _oar(fake)]
    with pytest.raises(InputError) as caught:
        submit_to(Submission(100, 100_000, ("ls",), preferred=100_000, app="a" * 60), targets)
    message = str(caught.value)
    assert message.startswith("--app-model: the tag makes an OAR job name of ")
    assert "over OAR's 100: shorten the model name (60 characters) by" in message
    assert slurm.calls == [] and fake.calls == []


def test_oar_itself_refuses_such_a_name_unhelpfully() -> None:
    """Why the check above: the fake answers as OAR 2.5.9 did on the testbed."""
    fake = _grid()
    out = fake.run(["oarsub", "-J", "--hold", "-n", "m1;" + "x" * 98, "-l", "nodes=1", "ls"],
                   10, check=False)
    assert out.rc == 8 and "verify your request syntax" in out.stderr and not fake.jobs


def test_an_mpi_job_on_oar_is_the_oar_runners_script_with_the_agent(tmp_path: Path) -> None:
    program = tmp_path / "jacobi.py"
    program.write_text("print('jacobi')\n")
    fake = _grid()
    shown, ids = submit_to(Submission(2, 4, (str(program), "--iterations", "30"), mpi=True,
                                      service="grid-ctl:7461"), [_oar(fake)])
    assert ids == [1] and shown == "1"
    [path] = [p for p in fake.files if p.endswith(".sh")]
    assert path.startswith(".malleable/mpi/")  # relative: the home over SSH
    job = fake.jobs[1]
    assert job.command == f"bash {path}" and job.state == "Hold" and job.want == 2
    assert tags.parse_oar(job.name).mpi
    script = fake.files[path]
    assert "SLURM_JOB_ID" not in script and "scontrol" not in script
    assert 'D="$HOME/.malleable/run/$OAR_JOB_ID"\n' in script
    agent = next(line for line in script.splitlines() if "malleable.site.agent" in line)
    assert shlex.split(agent)[:14] == [
        "python3", "-m", "malleable.site.agent", "--oar", "--service", "grid-ctl:7461",
        "--site", "grid", "--job", "$OAR_JOB_ID", "--run-dir", "$D", "--program", "jacobi.py"]
    assert "--iterations 30" in script and '"$OAR_NODEFILE"' in script
    assert subprocess.run(["bash", "-n"], input=script.encode(), check=False).returncode == 0


def test_mpi_on_oar_still_needs_the_service(tmp_path: Path) -> None:
    program = tmp_path / "jacobi.py"
    program.write_text("")
    fake = _grid()
    with pytest.raises(InputError, match=r"--mpi needs the service's channel address"):
        submit_to(Submission(1, 2, (str(program),), mpi=True), [_oar(fake)])
    assert fake.calls == []


def test_copies_on_slurm_and_oar_share_one_submission_id() -> None:
    slurm, fake = RecordingRunner(), _grid()
    shown, ids = submit_to(Submission(1, 2, ("hostname",)),
                           [Target(slurm, "alice", "vu"), _oar(fake)])
    comment = next(a for a in slurm.calls[0] if a.startswith("--comment="))
    sub = tags.parse(comment.split("=", 1)[1], "alice").sub
    assert ids == [4242, 1] and shown == f"alice:{sub}"
    assert tags.parse_oar(fake.jobs[1].name).sub == sub
    # both copies say there are two, so that the service waits for the second
    assert tags.parse(comment.split("=", 1)[1], "alice").copies == 2
    assert fake.jobs[1].name.endswith(";n=2")
    assert "--clusters=vu" in slurm.calls[0]


def test_a_slurm_site_reached_by_ssh_is_submitted_to_on_its_own_login_node() -> None:
    slurm = RecordingRunner()
    submit_to(Submission(1, 2, ("hostname",)), [Target(slurm, "alice", "vu", clusters=False)])
    assert not any(a.startswith("--clusters") for a in slurm.calls[0])


def test_an_oar_refusal_is_an_external_error_naming_the_site() -> None:
    fake = _grid()
    with pytest.raises(ExternalError, match=r"on grid: oarsub refused the job: .*not enough"):
        submit_to(Submission(5, 6, ("ls",)), [_oar(fake)])


# ---------------------------------------------------------------- the command line

def _config(tmp_path: Path) -> Path:
    (tmp_path / "key").write_text("")
    (tmp_path / "known_hosts").write_text("")
    path = tmp_path / "clusters.toml"
    path.write_text('[clusters.grid]\nkind = "oar"\n\n[clusters.vu]\n\n'
                    '[clusters.far]\nkind = "oar"\nhost = "far.example.org"\nuser = "alice"\n'
                    'key = "key"\nknown_hosts = "known_hosts"\ncommand_timeout = 90\n')
    return path


@pytest.fixture
def grid(monkeypatch: pytest.MonkeyPatch) -> FakeOar:
    """Every site of the config reached through the fake OAR site."""
    fake = _grid()

    def runner_for(site: SiteConfig) -> CommandRunner:
        return fake

    monkeypatch.setattr("malleable.adapters.slurm.sites.runner_for", runner_for)
    return fake


def test_the_command_submits_to_an_oar_site_of_the_config(
        tmp_path: Path, grid: FakeOar, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["submit", "--config", str(_config(tmp_path)), "--site", "grid", "--min", "1",
                 "--max", "3", "--time", "30", "--", "sleep", "300"])
    assert code == 0 and capsys.readouterr().out == "1\n"
    assert grid.jobs[1].state == "Hold" and grid.jobs[1].command == "sleep 300"


@pytest.mark.parametrize(("args", "message"), [
    (["--site", "grid", "--app-model", "a" * 64, "--preferred", "100000"],
     "--app-model: the tag makes an OAR job name of 113 characters"),
    (["--site", "nowhere"], "no site 'nowhere' in the config; valid: grid, vu, far"),
    ([], "--config: name the site(s) to submit to with --site"),
])
def test_command_refusals_exit_2_with_one_line(
        args: list[str], message: str, tmp_path: Path, grid: FakeOar,
        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["submit", "--config", str(_config(tmp_path)), "--min", "1", "--max", "100000",
                 *args, "--", "ls"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and "\n" not in err
    assert grid.calls == []


def test_targets_follow_the_config_ssh_as_its_user_or_here(tmp_path: Path) -> None:
    from malleable.adapters.shell import LocalRunner, SSHRunner
    from malleable.commands.submit import _targets

    config = load_config(_config(tmp_path))
    grid, vu, far = _targets(config, ("grid", "vu", "far"))
    assert isinstance(grid.runner, LocalRunner) and (grid.kind, grid.clusters) == ("oar", True)
    assert (vu.kind, vu.site, vu.clusters) == ("slurm", "vu", True)
    assert isinstance(far.runner, SSHRunner)
    assert (far.kind, far.user, far.clusters, far.timeout) == ("oar", "alice", False, 90.0)


def test_a_malleable_job_with_the_service_runs_its_agent_beside_the_command() -> None:
    fake = _grid()
    submit_to(Submission(1, 3, ("./app", "x y"), service="grid-ctl:7461"), [_oar(fake)])
    command = fake.calls[0][-1]
    argv = shlex.split(command)
    assert argv[:2] == ["sh", "-c"] and argv[3:] == ["malleable-job", "grid-ctl:7461", "grid",
                                                     "./app", "x y"]
    assert "python3 -m malleable.site.agent --oar" in argv[2]
    for rigid in (Submission(2, 2, ("./app",), service="h:1"), Submission(1, 3, ("./app",))):
        fake = _grid()
        submit_to(rigid, [_oar(fake)])
        assert fake.calls[0][-1] == "./app"  # no agent: placed, never resized
    with pytest.raises(InputError, match="--service: service address 'nohost'"):
        submit_to(Submission(1, 3, ("./app",), service="nohost"), [_oar(_grid())])


def test_the_agent_wrapper_gives_the_command_its_size_and_keeps_its_exit_code(
        tmp_path: Path) -> None:
    """The wrapper run by a real shell, with the real agent (its service unreachable: it
    keeps retrying until the command ends and the wrapper stops it)."""
    command = oar_command(Submission(1, 3, ("sh", "-c", 'cat "$MALLEABLE_RUN_DIR/size" '
                                            '"$MALLEABLE_RUN_DIR/nodes"; exit 3'),
                                     service="127.0.0.1:9"), "grid")
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("grid-n2\ngrid-n2\n")
    env = {**os.environ, "HOME": str(tmp_path), "OAR_JOB_ID": "7",
           "OAR_NODEFILE": str(nodefile),
           "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    done = subprocess.run(["sh", "-c", command], env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    assert (done.returncode, done.stdout) == (3, "1\ngrid-n2\n")
    run = tmp_path / ".malleable" / "oar-run" / "7"
    assert "channel:" in (run / "agent.log").read_text()  # it tried to reach the service
    ps = subprocess.run(["ps", "-eo", "args="], capture_output=True, text=True, check=True)
    assert f"--run-dir {run}" not in ps.stdout  # the agent was stopped with the command
