"""The site service's production site classes (:class:`~malleable.site.adapter.SiteSlurm`,
:class:`~malleable.site.oarsite.SiteOar`) as drivers of the ResourceManager contract.

A site never submits: a user submits a held, tagged job (``malleable submit``) and the
service's ``start`` releases (Slurm) or resumes (OAR) that copy. :class:`UserSubmits`
plays the user: its ``start`` first submits the held copy as user ``alice`` (the job's
range in its tag, ``size`` nodes), lets the site poll it, then calls the site's own
``start``. The service names the job ``alice:ID``; the shim gives the contract back its
own ids (``ID``) in views and events and passes ``alice:ID`` to the site. Everything else
(observe, events, grow, shrink, cancel, capabilities) is the site's own. The sites answer
at once (no negotiations: the contract has no PENDING answers)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from malleable.adapters.oar.cluster import OarCluster
from malleable.adapters.oar.ctl import OarCtl
from malleable.adapters.oar.payload import OarPayload
from malleable.clock import ScaledClock
from malleable.config import load_config
from malleable.errors import ExternalError
from malleable.model import ClusterView, JobSpec
from malleable.resources import Capability, JobEvent
from malleable.site import tag as tags
from malleable.site.adapter import SiteSlurm
from malleable.site.oarsite import SiteOar
from tests.fakes.drivers import (
    NODES,
    FakeOarDriver,
    FakeSlurmDriver,
    OarTestbedDriver,
    TestbedDriver,
    _fake_slurm_cluster,
    oar_testbed_driver,
    testbed_driver,
)
from tests.fakes.oar import FakeOar
from tests.fakes.slurm import FakeSlurm, node_names

#: The service's account on the fakes (its Slurm operator, its OAR sudo rule).
ACCOUNT = "malleable"
#: The user whose held jobs the contract's jobs are.
USER = "alice"


@dataclass
class UserSubmits:
    """A service site whose jobs a user submits held first (see the module docstring)."""

    site: SiteSlurm | SiteOar
    submit: Callable[[JobSpec, tags.UserTag, int], None]
    """Submit a held copy as :data:`USER`: the job, its tag, its nodes."""

    @property
    def name(self) -> str:
        return self.site.name

    @name.setter
    def name(self, value: str) -> None:
        self.site.name = value

    @property
    def capabilities(self) -> frozenset[Capability]:
        return self.site.capabilities

    @capabilities.setter
    def capabilities(self, value: frozenset[Capability]) -> None:
        self.site.capabilities = value

    def service_id(self, job_id: str) -> str:
        return f"{USER}:{job_id}"

    def _back(self, job_id: str) -> str:
        return job_id.removeprefix(f"{USER}:")

    def observe(self) -> ClusterView:
        view = self.site.observe()
        running = {self._back(k): dataclasses.replace(
            j, spec=dataclasses.replace(j.spec, id=self._back(j.spec.id)))
            for k, j in view.running.items()}
        return dataclasses.replace(view, running=MappingProxyType(running))

    def start(self, spec: JobSpec, size: int) -> int:
        if size >= 1:
            low, high = (spec.min_size, spec.max_size) if spec.malleable else (size, size)
            self.submit(spec, tags.UserTag(low, high, sub=spec.id), size)
            self.site.invalidate()
            self.site.observe()  # the site's poll finds the held copy
        return self.site.start(dataclasses.replace(spec, id=self.service_id(spec.id)), size)

    def offer_grow(self, job_id: str, offer: int) -> int:
        return self.site.offer_grow(self.service_id(job_id), offer)

    def request_shrink(self, job_id: str, amount: int, mandatory: bool) -> int:
        return self.site.request_shrink(self.service_id(job_id), amount, mandatory)

    def cancel(self, job_id: str) -> None:
        self.site.cancel(self.service_id(job_id))

    def drain_events(self) -> Sequence[JobEvent]:
        return [dataclasses.replace(e, job_id=self._back(e.job_id))
                for e in self.site.drain_events()]

    def close(self) -> None:
        self.site.close()


@dataclass
class SiteSlurmDriver(FakeSlurmDriver):
    users: UserSubmits | None = field(default=None)

    def vanish(self, job_id: str) -> None:
        assert self.users is not None
        native = self.users.site.native_id(self.users.service_id(job_id))
        assert native is not None
        del self.fake.jobs[native]  # out of squeue and of sacct: its end is unknown


def site_slurm_driver() -> SiteSlurmDriver:
    """The service's Slurm site (SiteSlurm over a SlurmCluster) on the fake Slurm."""
    fake = FakeSlurm(node_names(NODES), admin_levels={ACCOUNT: "Operator"})
    cluster = _fake_slurm_cluster(fake)
    site = SiteSlurm(cluster, account=ACCOUNT)

    def submit(spec: JobSpec, tag: tags.UserTag, size: int) -> None:
        fake.add_job(size, tags.encode(tag, USER), name="app", user=USER, held=True)

    users = UserSubmits(site, submit)
    return SiteSlurmDriver("site-slurm-fake", users, fake=fake, slurm=cluster, users=users)


@dataclass
class SiteOarDriver(FakeOarDriver):
    users: UserSubmits | None = field(default=None)

    def vanish(self, job_id: str) -> None:
        assert self.users is not None
        base = self.users.site.native_id(self.users.service_id(job_id))
        assert base is not None
        del self.fake.jobs[base]  # gone from oarstat, even with -j: its end is unknown


def site_oar_driver() -> SiteOarDriver:
    """The service's OAR site (SiteOar over an OarCluster) on the fake OAR; no job's agent
    connects, so its jobs are shown rigid and never resized (as the service does): it
    declares no resize here (its grow and shrink through an agent are
    tests/unit/test_site_oar_resize.py's)."""
    fake = FakeOar(node_names(NODES))
    clock = ScaledClock(float(fake.now), 1.0, wall=lambda: float(fake.now))
    cluster = OarCluster("grid", OarCtl(fake), clock, "contract", OarPayload(0.01),
                         sleep=lambda s: None)
    site = SiteOar(cluster, account=ACCOUNT)
    # No agent connects here, so the site shows its jobs rigid and never resizes them:
    # declared so, the contract skips its resize tests for this driver (with the reason).
    site.capabilities = frozenset()

    def submit(spec: JobSpec, tag: tags.UserTag, size: int) -> None:
        fake.user = USER
        try:
            OarCtl(fake).submit(["--hold", "-n", tags.encode_oar(tag), "-l", f"nodes={size}"],
                                "sleep 600")
        except ExternalError:  # OAR refuses more than the platform: the user has no copy
            pass
        finally:
            fake.user = ACCOUNT

    users = UserSubmits(site, submit)
    return SiteOarDriver("site-oar-fake", users, fake=fake, users=users)


@dataclass
class SiteSlurmTestbedDriver(TestbedDriver):
    """SiteSlurm over a SlurmCluster on site ``vu`` of a testbed that is up: the copies
    are ``alice``'s real ``sbatch --hold`` jobs, the service the config's account."""

    __test__ = False
    users: UserSubmits | None = None

    def teardown(self) -> None:
        try:
            self.testbed.exec("vu", ["scancel", "-u", USER])
            self.wait(lambda: not self._alices(), f"{USER}'s jobs to leave the queue")
        finally:
            self.rm.close()

    def _alices(self) -> list[str]:
        out = self.testbed.exec("vu", ["squeue", "-h", "-o", "%i", "-u", USER, "-t",
                                       "PD,R,CG,CF"], check=True).stdout
        return [line.strip() for line in out.splitlines() if line.strip()]


def site_slurm_testbed_driver(testbed: Any, workdir: Path) -> SiteSlurmTestbedDriver:
    """The service's Slurm site on the contract testbed (``--integration``)."""
    made = testbed_driver(testbed, workdir)
    assert made.slurm is not None
    site = SiteSlurm(made.slurm)

    def submit(spec: JobSpec, tag: tags.UserTag, size: int) -> None:
        testbed.exec("vu", ["sbatch", "--hold", f"--comment={tags.encode(tag, USER)}",
                            f"--nodes={size}", "--job-name=app", "--output=/dev/null",
                            "--wrap", "sleep 3600"], user=USER)  # refused: no copy

    users = UserSubmits(site, submit)
    return SiteSlurmTestbedDriver("site-slurm-testbed", users, testbed=testbed,
                                  slurm=made.slurm, users=users)


@dataclass
class SiteOarTestbedDriver(OarTestbedDriver):
    """SiteOar over an OarCluster on OAR site ``grid`` of a testbed that is up: the copies
    are ``alice``'s real ``oarsub --hold`` jobs (in her login shell), resumed and deleted by
    the service's account through the image's sudo rule (``oarresume``/``oardel`` as
    ``oar``). No job's agent connects: the site shows its jobs rigid and declares no
    resize, as ``site-oar-fake`` does."""

    __test__ = False
    users: UserSubmits | None = None

    def teardown(self) -> None:
        try:
            live = self._live()
            if live:  # alice's copies too, held or not: `oar` may delete every job
                self.testbed.exec(self.site, ["su", "oar", "-s", "/bin/sh", "-c",
                                              "oardel " + " ".join(map(str, live))])
            self.wait(lambda: not self._live(), "the contract's OAR jobs to end")
        finally:
            self.report_waits()
            self.rm.close()


def site_oar_testbed_driver(testbed: Any, workdir: Path,
                            site_name: str = "grid") -> SiteOarTestbedDriver:
    """The service's OAR site on the contract's OAR testbed (``--integration``)."""
    made = oar_testbed_driver(testbed, workdir, site_name)
    assert made.oar is not None
    ssh = load_config(workdir / "clusters.toml").site(site_name).ssh
    site = SiteOar(made.oar, account=ACCOUNT if ssh is None else ssh.user)
    site.capabilities = frozenset()  # no agent: rigid (the contract skips its resizes)

    def submit(spec: JobSpec, tag: tags.UserTag, size: int) -> None:
        argv = ["--hold", "-n", tags.encode_oar(tag), "-l", f"nodes={size}", "sleep 3600"]
        script = "cd && oarsub -J " + " ".join(f"'{a}'" for a in argv)
        testbed.exec(site_name, ["su", "-", USER, "-c", script], timeout=60)  # refused: no copy

    users = UserSubmits(site, submit)
    return SiteOarTestbedDriver("site-oar-testbed", users, testbed=testbed, oar=made.oar,
                                site=site_name, users=users)
