"""The composition root: a simulation, or a run of the manager on real sites, from a
config, a policy spec and a workload.

A library user, the command line and a service unit call the same functions:

* :func:`choose_policy` merges a config's ``[policy]`` table, ``--policy``,
  ``--policy-option`` and KOALA's ``--approach`` shorthand into one checked
  :class:`~malleable.policies.registry.PolicySpec`;
* :func:`platform` turns ``das3``, a node count or a clusters config into clusters;
* :func:`run_simulation` runs a workload through the manager on simulated clusters;
* :func:`open_run` opens (or, from its journal, resumes) a run on real sites,
  :func:`drive` runs it in real time and :func:`finish` writes its outputs.

Nothing here parses arguments or prints: that is the CLI's part.
"""

from __future__ import annotations

import inspect
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from malleable.errors import ExternalError, InputError
from malleable.health import SITE_TIMEOUT
from malleable.manager import Manager
from malleable.metrics.records import JobRecord
from malleable.metrics.runtrace import Lane, RunTrace, draw_figures
from malleable.metrics.summary import (
    RecordWriter,
    RunningSummary,
    Tee,
    jsonable,
    mechanism,
    output_dir,
    output_file,
    summarize,
    write_records,
)
from malleable.model import DAS3, Cluster, JobSpec, JobState, Operation
from malleable.policies.registry import PolicySpec, factory
from malleable.sim.run import (
    JobBatches,
    RecordSink,
    SimConfig,
    SimResult,
    check_jobs,
    simulate,
)
from malleable.workloads.load import load_workload
from malleable.workloads.swf import MAX_SIZE, write_swf

if TYPE_CHECKING:  # imported where a real run needs them: a simulation never loads paramiko,
    # the journal, the real-time driver or the config reader (about 13 ms of its start-up)
    from malleable.adapters.oar.cluster import OarCluster
    from malleable.adapters.oar.ctl import OarCtl
    from malleable.adapters.slurm.cluster import SlurmCluster
    from malleable.adapters.slurm.ctl import SlurmCtl
    from malleable.clock import ScaledClock
    from malleable.config import ClustersConfig, SiteConfig
    from malleable.kinds import Context
    from malleable.store import Resumed, RunInfo, Store

logger = logging.getLogger(__name__)

#: The policy when neither a command nor a config names one.
DEFAULT_POLICY = PolicySpec("fpsma")

# ----------------------------------------------------------------------------- policy


def choose_policy(configured: PolicySpec | None = None, name: str | None = None,
                  options: Mapping[str, Any] | None = None, approach: str | None = None,
                  source: str | None = None) -> PolicySpec:
    """The policy a command asked for, checked (InputError naming the valid names/options).

    ``configured`` (a config's ``[policy]``) is the base; ``name`` replaces it (and its
    options) when it names another policy; ``options`` and then ``approach`` (KOALA's
    ``--approach``, the ``approach`` option) override single options.
    """
    spec = configured or DEFAULT_POLICY
    if name is not None and name != spec.name:
        spec, source = PolicySpec(name), None
    given = (options or {}).get("approach")
    if approach is not None and given is not None and str(given) != approach:
        raise InputError(f"--approach {approach} and --policy-option approach={given} "
                         "disagree: give one of them")
    spec = spec.with_options(options or {})
    if approach is not None:
        spec = spec.with_options({"approach": approach})
    spec.build(source)  # every check happens here, before anything starts
    return spec


def approach_of(spec: PolicySpec) -> str | None:
    """KOALA's approach of a policy: its ``approach`` option or that option's default;
    None for a policy that has no such option."""
    if "approach" in spec.options:
        return str(spec.options["approach"])
    param = inspect.signature(factory(spec.name)).parameters.get("approach")
    if param is None or param.default is inspect.Parameter.empty:
        return None
    return str(param.default)


# ----------------------------------------------------------------------------- platform

#: The most nodes a simulated cluster may have: the bound of an SWF job's size, so that
#: a typo is refused, not simulated.
MAX_NODES = MAX_SIZE


def platform(spec: str) -> list[Cluster]:
    """``das3`` (the five DAS-3 clusters), ``N`` (one cluster of N nodes) or a clusters
    config file (each site's ``nodes``, ``reserve`` and ``speed``)."""
    if spec == "das3":
        return list(DAS3)
    if spec.isdigit():
        nodes = int(spec)
        if not 1 <= nodes <= MAX_NODES:
            raise InputError(f"--platform {spec}: a cluster needs at least one node and at "
                             f"most {MAX_NODES:,} (the bound of an SWF job's size)")
        return [Cluster("cluster", nodes)]
    path = Path(spec)
    if not path.exists():
        raise InputError(f"--platform {spec!r} is neither das3, a node count nor a clusters "
                         "config file")
    from malleable.config import load_config

    return clusters_of(load_config(path))


def clusters_of(config: ClustersConfig) -> list[Cluster]:
    """The simulated twins of a config's sites (each needs ``nodes``)."""
    missing = [site.name for site in config.sites if site.nodes is None]
    if missing:
        raise InputError(f"clusters.{missing[0]}.nodes: missing (a simulated platform needs "
                         "every site's node count)", source=config.source)
    for site in config.sites:
        nodes = site.nodes or 0
        if nodes > MAX_NODES:
            raise InputError(f"clusters.{site.name}.nodes: {nodes} is more than {MAX_NODES:,} "
                             "(the bound of an SWF job's size)", source=config.source)
        if site.reserve >= nodes:
            raise InputError(f"clusters.{site.name}.reserve: {site.reserve} leaves none of the "
                             f"site's {nodes} nodes to the manager; give a reserve below "
                             "nodes", source=config.source)
    return [Cluster(site.name, site.nodes or 0, site.reserve, site.speed)
            for site in config.sites]


def platform_policy(spec: str) -> tuple[PolicySpec | None, str | None]:
    """The ``[policy]`` of a ``--platform`` clusters config, and the file's name (None,
    None for ``das3``, a node count or a config without one): ``simulate`` runs it unless
    ``--policy`` names another, as ``manager run`` does with its config."""
    if spec == "das3" or spec.isdigit():
        return None, None
    from malleable.config import load_config

    config = load_config(spec)
    return config.policy, config.source


# ----------------------------------------------------------------------------- simulation


def sim_config(*, reconfig_cost: float = 0.0, release_delay: float = 0.0,
               background: float = 0.0, seed: int = 1,
               model_options: Sequence[str] = ()) -> SimConfig:
    """The simulator's settings from a command's options (``--reconfig-cost``,
    ``--release-delay``, ``--background`` mean inter-arrival, ``--model-option KEY=VALUE``):
    InputError naming the option when one is out of range or unknown."""
    import math

    from malleable.policies.registry import parse_options
    from malleable.sim.background import BackgroundSpec
    from malleable.sim.model_options import model_options as model_settings

    for flag, value in (("reconfig-cost", reconfig_cost), ("release-delay", release_delay),
                        ("background", background)):
        if value < 0 or not math.isfinite(value):
            raise InputError(f"--{flag} must be a non-negative number")
    spec = BackgroundSpec(interarrival=background) if background > 0 else None
    try:
        options = parse_options(list(model_options))
    except InputError as exc:
        raise InputError(str(exc).replace("--policy-option", "--model-option")) from None
    model = model_settings(options) if options else None
    return SimConfig(reconfig_cost=reconfig_cost, release_delay=release_delay,
                     background=spec, seed=seed, timeline=False, model=model)


def run_simulation(jobs: Sequence[JobSpec], clusters: Sequence[Cluster], policy: PolicySpec,
                   config: SimConfig) -> tuple[SimResult, dict[str, Any]]:
    """Simulate ``jobs`` under ``policy``; the result and its summary (with the policy, the
    mechanism counts of :func:`~malleable.metrics.summary.mechanism` and the model
    options other than the defaults)."""
    built = policy.build()
    result = simulate(jobs, clusters, built, config)
    summary = summarize(result.records, result.operations, result.makespan, result.utilization)
    summary.update(mechanism(result.records, _policy_counts(built)))
    summary.update(_settings(policy, config))
    return result, summary


def _policy_counts(built: object) -> dict[str, int] | None:
    """The policy's own mechanism counts (``counts``), if it keeps any."""
    counts = getattr(built, "counts", None)
    return dict(counts) if isinstance(counts, dict) else None


def _settings(policy: PolicySpec, config: SimConfig) -> dict[str, Any]:
    """The summary's record of the run's settings: the approach, the policy and its other
    options, and the model options other than the defaults."""
    out: dict[str, Any] = {"approach": approach_of(policy), "policy": policy.name}
    out.update(policy_options(policy.options))
    if config.model is not None and config.model.active:
        out["model_options"] = config.model.changed()
    return out


def stream_simulation(jobs: list[JobSpec] | JobBatches, clusters: Sequence[Cluster],
                      policy: PolicySpec, config: SimConfig,
                      out: Path | None = None,
                      watchers: Sequence[RecordSink] = ()) -> dict[str, Any]:
    """:func:`run_simulation` in the memory of the live jobs only, its summary: ``jobs``
    is consumed (a list is emptied; batches are taken as they fall due), each job's row
    of ``out/jobs.csv`` (with ``out``) is written once it and the jobs submitted before it
    have ended, and the summary is made from running totals
    (:class:`~malleable.metrics.summary.RunningSummary`). The outputs are the same as
    :func:`run_simulation`'s and :func:`write_outputs`'s, byte for byte (``summary.json``
    is left to the caller: it adds to the summary)."""
    built = policy.build()
    totals = RunningSummary()
    if out is None:
        result = simulate(jobs, clusters, built, config, sink=_told(totals.add, watchers),
                          consume=isinstance(jobs, list))
    else:
        with output_file(output_dir(out) / "jobs.csv") as handle:
            result = simulate(jobs, clusters, built, config,
                              sink=_told(Tee(RecordWriter(handle), totals), watchers),
                              consume=isinstance(jobs, list))
    summary = totals.summary(result.makespan, result.utilization)
    summary.update(result.background)  # a real log's local users: empty without one
    summary.update(totals.mechanism(_policy_counts(built)))
    summary.update(_settings(policy, config))
    return summary


def _told(sink: RecordSink, watchers: Sequence[RecordSink]) -> RecordSink:
    """``sink``, then each of ``watchers`` (a progress bar, the figures' trace), for each
    record; without watchers, the sink itself: nothing added to the run's hot path."""
    if not watchers:
        return sink
    every = (sink, *watchers)

    def all_of(record: JobRecord, grows: int, shrinks: int) -> None:
        for each in every:
            each(record, grows, shrinks)
    return all_of


def write_summary_json(out: Path, summary: Mapping[str, Any]) -> None:
    """``summary.json`` in ``out`` (created), as :func:`write_outputs` writes it."""
    with output_file(output_dir(out) / "summary.json") as handle:
        handle.write(json.dumps(jsonable(summary), indent=2) + "\n")


def policy_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``{"policy_options": ...}`` for options other than the approach (its own key), or {}."""
    rest = {k: v for k, v in options.items() if k != "approach"}
    return {"policy_options": rest} if rest else {}


def write_outputs(out: Path, records: Sequence[JobRecord], summary: Mapping[str, Any],
                  operations: Sequence[Operation]) -> None:
    """``jobs.csv`` and ``summary.json`` in ``out`` (created)."""
    output_dir(out)
    write_records(out / "jobs.csv", records, operations)
    write_summary_json(out, summary)



# ----------------------------------------------------------------------------- real runs


@dataclass(frozen=True)
class RunRequest:
    """What a run on real sites is asked to do (``manager run``'s options)."""

    sites: tuple[SiteConfig, ...]
    policy: PolicySpec
    workload: str
    seed: int = 1
    jobs: int | None = None
    time_scale: float = 1.0


@dataclass
class ManagerRun:
    """Everything one real-time run is made of."""

    info: RunInfo
    store: Store
    manager: Manager
    adapters: dict[str, SlurmCluster | OarCluster]
    clock: ScaledClock
    pending: list[JobSpec]
    workload: list[JobSpec]
    resumed: Resumed | None
    cycle_seconds: list[float] = field(default_factory=list)
    """How long each real-time cycle of this process took (wall seconds)."""

    @property
    def policy(self) -> PolicySpec:
        return held_policy(self.info)

    def close(self) -> None:
        """Close every site's connection (jobs keep running; the journal stays)."""
        for adapter in self.adapters.values():
            adapter.close()


def select_sites(config: ClustersConfig, names: str | None) -> tuple[SiteConfig, ...]:
    """The sites named in ``A,B`` (all when None or empty)."""
    if not names:
        return config.sites
    return tuple(config.site(name.strip()) for name in names.split(",") if name.strip())


#: The commands a site's adapter runs to poll and place, by ``kind``.
SITE_COMMANDS = {"slurm": ("sinfo", "squeue", "sbatch", "scontrol", "scancel"),
                 "oar": ("oarstat", "oarsub", "oardel")}


def check_local_commands(sites: Sequence[SiteConfig]) -> None:
    """ExternalError, before a run starts, for a site without ``host`` (its commands run
    on this machine) whose scheduler commands are not on this machine's PATH: "command not
    found" never gets better by waiting, so it is not retried as an unavailable site is."""
    import shutil

    for site in sites:
        if site.ssh is not None or site.rest is not None:  # SSH, or slurmrestd: no commands
            continue
        missing = [c for c in SITE_COMMANDS.get(site.kind, ()) if shutil.which(c) is None]
        if missing:
            raise ExternalError(f"site {site.name}: {', '.join(missing)}: command not found on "
                                f"this machine (the site has no host, so its {site.kind} "
                                "commands run here): install them, or give the site's host "
                                "in the config")


def build_adapters(sites: Sequence[SiteConfig], clock: ScaledClock, info: RunInfo,
                   store: Store) -> dict[str, SlurmCluster | OarCluster]:
    return {site.name: build_adapter(site, clock, info, store) for site in sites}


def build_adapter(site: SiteConfig, clock: ScaledClock, info: RunInfo,
                  store: Store) -> SlurmCluster | OarCluster:
    """The adapter of one site of ``manager run``, by its ``kind``, from the adapter
    registry (:func:`malleable.kinds.build`; a simulation never loads paramiko)."""
    from malleable.kinds import Context, build

    adapter: SlurmCluster | OarCluster = build(
        "run", site, Context(clock, info.run_id, store, info.time_scale),
        what=f"clusters.{site.name}.kind (manager run)")
    return adapter


def slurm_run_site(site: SiteConfig, ctl: SlurmCtl, context: Context) -> SlurmCluster:
    """A Slurm site of ``manager run`` (the registry's ``run`` builder of ``slurm``). Its
    expansions answer pending: each runs in a worker of the adapter (``salloc`` wait,
    hand-over, confirmation), so a slow or refused one holds up no site's cycle
    (docs/slurm.md, "Pending answers")."""
    from malleable.adapters.pending import Negotiations
    from malleable.adapters.slurm.cluster import SlurmCluster
    from malleable.adapters.slurm.payload import Payload

    return SlurmCluster(site.name, ctl, context.clock, context.run_id,
                        Payload(context.time_scale, site.speed, finish_file=site.finish_file),
                        site.reserve, site.speed, journal=context.journal,
                        negotiations=Negotiations(site.name), pending_expansions=True)


def oar_run_site(site: SiteConfig, ctl: OarCtl, context: Context) -> OarCluster:
    """An OAR site of ``manager run`` (the registry's ``run`` builder of ``oar``)."""
    from malleable.adapters.oar.cluster import OarCluster
    from malleable.adapters.oar.payload import OarPayload

    return OarCluster(site.name, ctl, context.clock, context.run_id,
                      OarPayload(context.time_scale, site.speed, finish_file=site.finish_file),
                      site.reserve, site.speed, journal=context.journal)


MAX_RETRIES = 2
"""How many times a real run submits again a job that failed through no fault of its own
(a node failed under it)."""


def open_run(request: RunRequest, store: Store) -> ManagerRun:
    """A new run, or the run the journal holds (resumed: InputError if it differs)."""
    from secrets import token_hex

    from malleable.clock import ScaledClock
    from malleable.store import RunInfo, resume

    info = store.run_info()
    if info is None:
        workload = request_workload(request)
        info = RunInfo(token_hex(4), time.time(), request.time_scale,
                       approach_of(request.policy) or "", request.policy.name, request.workload,
                       dict(request.policy.options))
        store.begin_run(info, workload)
    else:
        check_same_run(info, request, store.path)
        workload = store.workload()
    clock = ScaledClock(info.epoch0, info.time_scale)
    adapters = build_adapters(request.sites, clock, info, store)
    manager = Manager(held_policy(info).build(), adapters, journal=store,
                      max_retries=MAX_RETRIES)
    resumed = resume(store, manager, adapters) if store.submitted() else None
    done = set(manager.records)
    pending = [spec for spec in workload if spec.id not in done]
    return ManagerRun(info, store, manager, adapters, clock, pending, workload, resumed)


def request_workload(request: RunRequest) -> list[JobSpec]:
    jobs = load_workload(request.workload, request.seed)
    if request.jobs is not None:
        jobs = sorted(jobs, key=lambda j: j.submit_time)[:request.jobs]
    check_jobs(jobs)
    return jobs


def held_policy(info: RunInfo) -> PolicySpec:
    """The policy a journal's run uses (a journal from before policy options has only a
    KOALA policy name and an approach)."""
    if info.options or not info.approach:
        return PolicySpec(info.policy, MappingProxyType(dict(info.options)))
    return PolicySpec(info.policy, MappingProxyType({"approach": info.approach}))


def _run_keys(policy: PolicySpec, workload: str, time_scale: float) -> dict[str, Any]:
    rest = {k: v for k, v in policy.options.items() if k != "approach"}
    return {"policy": policy.name, "approach": approach_of(policy),
            "policy-option": ", ".join(f"{k}={v!r}" for k, v in sorted(rest.items())) or "none",
            "workload": workload, "time-scale": time_scale}


def check_same_run(info: RunInfo, request: RunRequest, source: str) -> None:
    """InputError when the journal holds a run with another policy, workload or scale."""
    asked = _run_keys(request.policy, request.workload, request.time_scale)
    held = _run_keys(held_policy(info), info.workload, info.time_scale)
    differ = [f"--{k} {asked[k]} (the run has {held[k]})" for k in asked if asked[k] != held[k]]
    if differ:
        raise InputError("this state file holds another run: " + "; ".join(differ) +
                         ". Use the run's options, or a new --state file", source=source)


def drive(run: ManagerRun, poll: float, deadline: float | None,
          on_cycle: Callable[[float], None] = lambda now: None,
          site_timeout: float | None = SITE_TIMEOUT) -> str:
    """Run the manager in real time until done, the deadline or a signal; how it stopped.

    A site unavailable for ``site_timeout`` seconds without a break is given up (its
    jobs recorded failed, then probed and used again once it answers); ExternalError once
    every site is given up."""
    from malleable.realtime import RealtimeDriver

    saved = [run.store.saved_state() or ""]

    def cycled(now: float) -> None:
        state = json.dumps(run.manager.export_state(), sort_keys=True)
        if state != saved[0]:  # the policy's memory and the tries, journaled when changed
            run.store.save_state(state)
            saved[0] = state
        on_cycle(now)

    driver = RealtimeDriver(run.manager, run.clock, run.pending, poll, on_cycle=cycled,
                            site_timeout=site_timeout)
    outcome = driver.run(deadline)
    run.cycle_seconds.extend(outcome.cycle_seconds)
    logger.info("%d cycles, mean %.3f s", outcome.cycles,
                sum(outcome.cycle_seconds) / max(1, len(outcome.cycle_seconds)))
    return outcome.stopped


def write_workload(run: ManagerRun, out: Path) -> None:
    """The run's workload as ``out/workload.swf`` (before it runs, so a crash keeps it)."""
    output_dir(out)
    write_swf(out / "workload.swf", run.workload, f"manager run {run.info.run_id}")


def offline_sites(run: ManagerRun) -> list[str]:
    """Sites the manager could not reach in its last cycle."""
    return [name for name, h in run.manager.health.items() if not h.online or h.busy]


def finished(run: ManagerRun) -> int:
    """How many of the run's jobs have finished."""
    return sum(1 for r in run.manager.records.values() if r.state.finished)


def finish(run: ManagerRun, out: Path, stopped: str, compare_sim: bool = False,
           figures: bool = False) -> dict[str, Any]:
    """Write ``jobs.csv`` and ``summary.json`` (and, with ``compare_sim``, ``simulated/``)
    to ``out``, and with ``figures`` the run's figures (in both); the summary."""
    output_dir(out)
    records = list(run.manager.records.values())
    ends = [r.end for r in records if r.end is not None]
    start = min((s.submit_time for s in run.workload), default=0.0)
    end = max(ends, default=start)
    nodes = sum(site_nodes(run, name) for name in run.adapters)
    busy = sum(r.node_seconds() for r in records)
    utilization = busy / (nodes * end) if nodes and end > 0 else 0.0
    summary = summarize(records, run.manager.operations, end - start, utilization)
    summary.update(approach=run.info.approach or None, policy=run.info.policy,
                   workload=run.info.workload, time_scale=run.info.time_scale,
                   run_id=run.info.run_id, sites=",".join(run.adapters), nodes=nodes,
                   stopped=stopped, resizes=run.store.resize_outcomes(),
                   site_health={name: h.summary() for name, h in run.manager.health.items()},
                   cycles=len(run.cycle_seconds), cycle_p95_s=_p95(run.cycle_seconds),
                   failed_jobs={r.spec.id: r.reason or "failed" for r in run.manager.failed},
                   cancelled_elsewhere=cancelled_elsewhere(run.manager),
                   retries=dict(run.manager.retries), node_failures=node_failures(run),
                   stray_helpers=stray_helpers(run))
    summary.update(policy_options(run.policy.options))
    write_records(out / "jobs.csv", records, run.manager.operations)
    lanes = [Lane(name, site_nodes(run, name)) for name in run.adapters]
    if figures:
        title = (f"{run.info.workload} · {run.policy.label()} · real run {run.info.run_id} "
                 f"(model seconds: the testbed ran them x{run.info.time_scale:g})")
        draw_figures(RunTrace.of(records, lanes), out, title)
    if compare_sim:
        summary["simulated"] = simulate_twin(run, out / "simulated", figures)
    (out / "summary.json").write_text(json.dumps(jsonable(summary), indent=2) + "\n")
    return summary


def cancelled_elsewhere(manager: Manager) -> dict[str, str]:
    """Jobs that ended CANCELLED though the manager never cancelled them (an
    administrator's ``scancel``, a controller that lost them): work the run did not do."""
    mine = {op.job_id for op in manager.operations if op.kind == "cancel"}
    return {r.spec.id: r.reason or "cancelled on its site"
            for r in manager.records.values()
            if r.state is JobState.CANCELLED and r.spec.id not in mine}


def node_failures(run: ManagerRun) -> list[dict[str, object]]:
    """Managed jobs found on dead nodes, per site, with what was done (shed or not)."""
    return [{"site": name, **entry} for name, adapter in run.adapters.items()
            for entry in getattr(adapter, "node_failures", [])]


def stray_helpers(run: ManagerRun) -> list[dict[str, object]]:
    """Helper allocations found stray, per site, with what became of them."""
    return [{"site": name, **entry} for name, adapter in run.adapters.items()
            for entry in getattr(adapter, "stray_helpers", {}).values()]


def _p95(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 3)


def site_nodes(run: ManagerRun, name: str) -> int:
    """A site's node count as the manager last saw it (observed now if never)."""
    view = run.manager.last_view
    if view is not None and name in view.clusters and view.clusters[name].nodes:
        return view.clusters[name].nodes
    try:
        return run.adapters[name].observe().nodes
    except ExternalError as exc:  # never reached in this run: it counts no nodes
        logger.warning("site %s: size unknown (%s); counted as 0 nodes", name, exc)
        return 0


def simulate_twin(run: ManagerRun, out: Path, figures: bool = False) -> dict[str, Any]:
    """The same workload, policy and cluster sizes in the simulator, written to ``out``
    (with ``figures``, its figures too, beside the real run's)."""
    clusters = [Cluster(name, max(1, site_nodes(run, name)), a.reserve, a.speed)
                for name, a in run.adapters.items()]
    result, summary = run_simulation(run.workload, clusters, run.policy, SimConfig())
    for key in ("approach", "policy", "policy_options"):
        summary.pop(key, None)
    write_outputs(out, result.records, summary, result.operations)
    if figures:
        lanes = [Lane(c.name, c.nodes) for c in clusters]
        draw_figures(RunTrace.of(result.records, lanes), out,
                     f"{run.info.workload} · {run.policy.label()} · simulated twin")
    return summary
