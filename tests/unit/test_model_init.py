"""The hand-written ``__init__``s of dataclasses (model.py, "construction"; the records and
the simulated cluster's jobs) against the ones dataclasses would generate from the fields: the
same signature, the same effect, in the pure build (where quick_init replaces model.py's) and
in the compiled one (where they run, compiled). Adding a field without adding it to the
``__init__`` fails here."""

from __future__ import annotations

import ast
import copy
import dataclasses
import inspect
import pickle
import sys
from pathlib import Path
from types import FunctionType
from typing import Any

import pytest

from malleable import model
from malleable.metrics.records import JobRecord
from malleable.model import (
    Action,
    Cancel,
    Cluster,
    ClusterView,
    Defer,
    Grow,
    JobKind,
    JobSpec,
    Operation,
    Place,
    Reject,
    RunningJob,
    Shrink,
    SizeRule,
    View,
    WaitingJob,
)
from malleable.sim.cluster import _Job

SPEC = JobSpec("j", JobKind.MALLEABLE, 2, 8, 4, submit_time=3.0, app="gadget", runtime=50.0,
               preferred_size=6, size_rule=SizeRule.POW2, walltime=90.0, user="u", group="g")
JOB = RunningJob(SPEC, "c", 4, 1.0, managed=False, releasing=1, growing=2,
                 feedback={"efficiency": 0.5}, resized_at=2.0)
CLUSTER = ClusterView("c", 16, 3, reserve=2, running={"j": JOB}, pending=5, speed=1.5,
                      online=False, changes=(["j"], 1))

#: Every init field set, none to its default: one value of each class.
FULL: dict[type, dict[str, Any]] = {
    JobSpec: {f.name: getattr(SPEC, f.name) for f in dataclasses.fields(SPEC)},
    RunningJob: {f.name: getattr(JOB, f.name) for f in dataclasses.fields(JOB)},
    ClusterView: {"name": "c", "nodes": 16, "idle": 3, "reserve": 2, "running": {"j": JOB},
                  "pending": 5, "speed": 1.5, "online": False, "changes": (["j"], 1)},
    WaitingJob: {"spec": SPEC, "tries": 2},
    View: {"time": 4.0, "clusters": {"c": CLUSTER}, "waiting": (WaitingJob(SPEC, 1),)},
    Action: {},
    Place: {"job_id": "j", "cluster": "c", "size": 3},
    Grow: {"job_id": "j", "offer": 2},
    Shrink: {"job_id": "j", "amount": 2, "mandatory": True},
    Cancel: {"job_id": "j", "reason": "r"},
    Defer: {"job_id": "j"},
    Reject: {"job_id": "j", "reason": "r"},
    Cluster: {"name": "c", "nodes": 8, "reserve": 1, "speed": 2.0},
    Operation: {"time": 1.0, "kind": "grow", "job_id": "j", "cluster": "c", "amount": 2},
    model.JobEvent: {"time": 1.0, "job_id": "j", "state": model.JobState.FAILED, "size": 2,
                     "reason": "r", "retriable": True, "answer": "grow", "amount": 1},
}

#: The same for the other dataclasses with a written ``__init__`` (mutable, compiled).
OTHERS: dict[type, dict[str, Any]] = {
    JobRecord: {"spec": SPEC, "cluster": "c", "placed": 1.0, "start": 2.0, "end": 3.0,
                "state": model.JobState.COMPLETED, "reason": "r", "_first": 4,
                "_later": [(2.5, 6)]},
    _Job: {"spec": SPEC, "curve": float, "size": 4, "start": 1.0, "managed": False,
           "progress": 0.5, "last": 2.0, "paused_until": 3.0, "releasing": 1,
           "resized_at": 2.5, "version": 7, "view": JOB},
}
WRITTEN = [*model.VALUES, *OTHERS]


def _generated(cls: type) -> type:
    """A frozen dataclass with ``cls``'s fields and the ``__init__`` dataclasses writes."""
    specs = [(f.name, f.type, dataclasses.field(
        default=f.default, default_factory=f.default_factory, init=f.init, repr=f.repr,
        compare=f.compare, kw_only=f.kw_only)) for f in dataclasses.fields(cls)]
    frozen = cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    return dataclasses.make_dataclass(cls.__name__, specs, frozen=frozen, slots=True)


def _written(cls: type) -> inspect.Signature:
    """The signature of ``cls``'s ``__init__`` as written in its module's source (compiled,
    the class shows none)."""
    module = Path(sys.modules[cls.__module__].__file__ or "")
    source = module.with_name(module.name.split(".")[0] + ".py").read_text()
    (node,) = [n for n in ast.walk(ast.parse(source))
               if isinstance(n, ast.ClassDef) and n.name == cls.__name__]
    inits = [f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"]
    if not inits:
        return inspect.Signature()
    args = inits[0].args
    assert not args.posonlyargs and not args.vararg and not args.kwarg
    defaults = [None] * (len(args.args) - len(args.defaults)) + list(args.defaults)

    def param(arg: ast.arg, default: ast.expr | None, kind: Any) -> inspect.Parameter:
        value = (inspect.Parameter.empty if default is None
                 else eval(ast.unparse(default), vars(sys.modules[cls.__module__])))
        return inspect.Parameter(arg.arg, kind, default=value)

    return inspect.Signature(
        [param(a, d, inspect.Parameter.POSITIONAL_OR_KEYWORD)
         for a, d in zip(args.args[1:], defaults[1:], strict=True)]
        + [param(a, d, inspect.Parameter.KEYWORD_ONLY)
           for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)])


def _built(cls: type, *args: Any, **kwargs: Any) -> object:
    """``cls(*args, **kwargs)`` through the ``__init__`` written in model.py (plain Python:
    the one quick_init replaced; compiled: the class's own)."""
    written = getattr(cls.__init__, "__wrapped__", None)
    if written is None:
        return cls(*args, **kwargs)
    made = cls.__new__(cls)
    written(made, *args, **kwargs)
    return made


def _values(made: object) -> dict[str, object]:
    return {f.name: getattr(made, f.name) for f in dataclasses.fields(made)}  # type: ignore[arg-type]


def test_every_value_class_is_listed() -> None:
    classes = {c for c in vars(model).values() if isinstance(c, type)
               and dataclasses.is_dataclass(c) and c.__module__ == model.__name__}
    assert classes == set(model.VALUES) == set(FULL)


@pytest.mark.parametrize("cls", WRITTEN, ids=lambda c: c.__name__)
def test_the_written_init_has_the_generated_signature(cls: type) -> None:
    theirs = inspect.signature(_generated(cls))
    ours = _written(cls)
    assert [(p.name, p.kind) for p in ours.parameters.values()] == [
        (p.name, p.kind) for p in theirs.parameters.values()]
    factories = {f.name for f in dataclasses.fields(cls)
                 if f.default_factory is not dataclasses.MISSING}
    for p in theirs.parameters.values():
        expected = model._FACTORY if p.name in factories else p.default
        assert ours.parameters[p.name].default is expected or (
            ours.parameters[p.name].default == expected), p.name


@pytest.mark.parametrize("cls", WRITTEN, ids=lambda c: c.__name__)
def test_the_init_has_the_generated_effect(cls: type) -> None:
    generated = _generated(cls)
    full = FULL[cls] if cls in FULL else OTHERS[cls]
    assert set(full) == {f.name for f in dataclasses.fields(cls) if f.init}
    assert _values(_built(cls, **full)) == _values(generated(**full))
    assert _values(cls(**full)) == _values(generated(**full))
    positional = [v for f in dataclasses.fields(cls) if f.init and not f.kw_only
                  for v in [full[f.name]]]
    keyword = {f.name: full[f.name] for f in dataclasses.fields(cls) if f.init and f.kw_only}
    assert _values(_built(cls, *positional, **keyword)) == _values(
        generated(*positional, **keyword))
    required = {f.name: full[f.name] for f in dataclasses.fields(cls) if f.init
                and f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING}
    made = _built(cls, **required)
    assert _values(made) == _values(generated(**required)) == _values(cls(**required))
    for f in dataclasses.fields(cls):
        if f.default_factory is not dataclasses.MISSING:  # a new value each time, as theirs
            fresh = f.default_factory() is not f.default_factory()
            again = _built(cls, **required)
            assert (getattr(made, f.name) is not getattr(again, f.name)) == fresh
    with pytest.raises(TypeError):
        _built(cls, *positional, "one too many")


@pytest.mark.parametrize("cls", model.VALUES, ids=lambda c: c.__name__)
def test_values_survive_pickle_and_copy(cls: type) -> None:
    made = cls(**FULL[cls])
    for again in (pickle.loads(pickle.dumps(made)), copy.copy(made), copy.deepcopy(made)):
        assert type(again) is cls and again == made and _values(again) == _values(made)


def test_the_build_picks_the_init() -> None:
    """Plain Python: quick_init's; compiled: the written ones, in native classes."""
    compiled = not isinstance(model.quick_init, FunctionType)
    for cls in model.VALUES:
        init = cls.__init__
        if compiled:
            assert not isinstance(init, FunctionType), cls
        elif dataclasses.fields(cls):
            assert "_set_" in " ".join(init.__code__.co_names), cls


def test_checks_and_equality_are_kept() -> None:
    for build in (JobSpec, lambda *args: _built(JobSpec, *args)):
        with pytest.raises(ValueError, match="minimum size 5 is above"):
            build("x", JobKind.MALLEABLE, 5, 4, 4)
    for build in (Cluster, lambda *args: _built(Cluster, *args)):
        with pytest.raises(ValueError, match="at least one node"):
            build("c", 0)
    assert ClusterView(**{**FULL[ClusterView], "changes": None}) == CLUSTER  # not compared
    assert hash(Place("j", "c", 3)) == hash(Place("j", "c", 3))
    assert Place("j", "c", 3) != Place("j", "c", 4)
    assert CLUSTER.malleable_jobs() == []  # JOB is not managed: the cache starts empty
    with pytest.raises(dataclasses.FrozenInstanceError):
        SPEC.user = "v"  # type: ignore[misc]
    assert dataclasses.replace(SPEC, user="v").user == "v"
