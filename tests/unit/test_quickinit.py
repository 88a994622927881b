"""quick_init: the same __init__ as the dataclass's (signature and effect), only faster."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from dataclasses import InitVar, dataclass, field
from typing import Any

import pytest

from malleable import model
from malleable.model import quick_init

_SHARED: list[int] = []


def _pair() -> tuple[type[Any], type[Any]]:
    """The same class twice: with the dataclass's own __init__ and with quick_init's."""

    def make() -> type[Any]:
        @dataclass(frozen=True, slots=True)
        class Sample:
            a: int
            b: str = "b"
            c: list[int] = field(default_factory=list)
            d: int | None = field(default=None, init=False, compare=True)
            e: tuple[int, ...] = field(default=(), init=False)
            f: float = field(default=1.5, kw_only=True)
            g: list[int] = field(default_factory=lambda: _SHARED, kw_only=True)

            def __post_init__(self) -> None:
                if self.a < 0:
                    raise ValueError("a < 0")
                object.__setattr__(self, "d", self.a * 2)

        return Sample

    return make(), quick_init(make())


CALLS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    ((1,), {}),
    ((1, "x"), {}),
    ((1, "x", [3]), {}),
    ((), {"a": 2, "c": [4], "f": 2.5}),
    ((3,), {"g": [9]}),
    ((-1,), {}),  # __post_init__ refuses
    ((), {}),  # missing a
    ((1, "x", [3], 4), {}),  # too many positional (f is keyword-only)
    ((1,), {"d": 3}),  # not an init parameter
    ((1,), {"zz": 3}),
]


@pytest.mark.parametrize(("args", "kwargs"), CALLS)
def test_same_effect_as_the_dataclass_init(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    plain, quick = _pair()

    def outcome(cls: type[Any]) -> object:
        try:
            made = cls(*args, **kwargs)
        except (TypeError, ValueError) as exc:
            return type(exc)
        return tuple(getattr(made, f.name) for f in dataclasses.fields(made))

    assert outcome(quick) == outcome(plain)
    if not isinstance(outcome(plain), type):
        made = quick(*args, **kwargs)
        assert repr(made).replace(quick.__qualname__, "X") == repr(
            plain(*args, **kwargs)).replace(plain.__qualname__, "X")
        assert made == quick(*args, **kwargs)
        assert made.c is not quick(*args, **kwargs).c or "c" in kwargs or len(args) > 2
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.a = 5


def test_same_signature_as_the_dataclass_init() -> None:
    plain, quick = _pair()
    ours = inspect.signature(quick)
    theirs = inspect.signature(plain)
    assert [(p.name, p.kind) for p in ours.parameters.values()] == [
        (p.name, p.kind) for p in theirs.parameters.values()]
    for name in ("b", "f"):
        assert ours.parameters[name].default == theirs.parameters[name].default


def test_model_values_keep_defaults_and_stay_frozen_and_picklable() -> None:
    spec = model.JobSpec("7", model.JobKind.MALLEABLE, 2, 8, 4, app="fixed", runtime=10.0)
    job = model.RunningJob(spec, "c", 4, 0.0)
    assert job.feedback == {} and job.managed and job.resized_at is None
    view = model.ClusterView("c", 10, 6, running={"7": job})
    assert view.malleable_jobs() == [job]
    op = model.Operation(1.0, "place", "7", "c", 4)
    assert pickle.loads(pickle.dumps((spec, op))) == (spec, op)
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.idle = 3  # type: ignore[misc]
    with pytest.raises(ValueError):  # JobSpec's __post_init__ still checks
        model.JobSpec("8", model.JobKind.MALLEABLE, 5, 4, 4)


def test_replaces_a_written_init() -> None:
    @dataclass(frozen=True, slots=True)
    class Written:
        a: int
        b: str = "b"

        def __init__(self, a: int, b: str = "b") -> None:
            object.__setattr__(self, "a", a)
            object.__setattr__(self, "b", b)

    written = Written.__init__
    quick_init(Written)
    assert Written.__init__ is not written
    assert "_set_" in " ".join(Written.__init__.__code__.co_names)
    assert (Written(1).a, Written(1).b, Written(2, "c").b) == (1, "b", "c")


def test_refuses_what_it_cannot_handle() -> None:
    @dataclass(frozen=True)
    class NoSlots:
        a: int

    with pytest.raises(TypeError, match="slotted"):
        quick_init(NoSlots)

    @dataclass(frozen=True, slots=True)
    class WithInitVar:
        a: int
        b: InitVar[int] = 0

    with pytest.raises(TypeError, match="InitVar"):
        quick_init(WithInitVar)

    @dataclass(frozen=True, slots=True, init=False)
    class NoInit:
        a: int = 0

    with pytest.raises(TypeError, match="no generated __init__"):
        quick_init(NoInit)
