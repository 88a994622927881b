"""The tag that marks a job as malleable: versioned JSON in a Slurm job's comment, or its
compact form in an OAR job's name.

A user (``malleable submit``, or plain ``sbatch``) writes, without spaces::

    {"malleable_job":1,"min":2,"max":8,"preferred":4,"app":"fixed","mpi":true,"sub":"9f3e21c4","copies":2}

* ``malleable_job`` the format's version (1); required;
* ``min``, ``max`` the size range in nodes (integers, ``1 <= min <= max <= MAX_NODES``);
  required; the job's own node count (``sbatch -N``) is its initial size;
* ``preferred`` optional, within ``[min, max]``;
* ``app`` optional application model name (letters, digits, ``._-``, at most 64);
* ``mpi`` optional boolean: the job runs a ``malleable.mpi`` application through the runner;
* ``sub`` optional submission id (``[A-Za-z0-9_-]{1,32}``): copies of one submission on
  several sites share it, and the service places one of them;
* ``copies`` optional, only with ``sub``: how many sites the submission was sent to
  (an integer in ``[2, MAX_COPIES]``; ``malleable submit`` writes it with several sites).
  The service places such a job only once it has found that many copies, or once
  ``service.copies_grace`` seconds have passed since it adopted the job (then where its
  copies are, with one log line). Without it the copies are placed as found;
* ``user`` optional: if present it must be the job's owner as Slurm reports it.

Anything else (longer than :data:`MAX_LENGTH`, invalid JSON, another version, unknown
keys, wrong types, negative or inconsistent sizes, a user that is not the owner) is
not a tag: :func:`parse` says why, and the service logs it once and leaves the job alone.
The service's own internal tags (``{"malleable":1,"run":...}``, see
:mod:`malleable.adapters.slurm.meta`) are a different key and never parse here.

**On OAR** the tag is the job's name (``oarsub -n``), which OAR stores in a
``varchar(100)``: the JSON form does not fit with every key, so OAR jobs carry a compact
form (:func:`encode_oar`, :func:`parse_oar`), without spaces::

    m1;min=2;max=8;pref=4;app=fixed;mpi;sub=9f3e21c4;n=2

``m1`` is the version (1) and comes first; then ``key=value`` parts in any order, each key
at most once: ``min`` and ``max`` (required), ``pref`` (``preferred``), ``app``, ``sub``,
``n`` (``copies``), and the bare flag ``mpi``; the values obey the checks of the JSON
form. There is no ``user`` key: the owner is always oarstat's ``owner``. A name of more than
:data:`OAR_MAX_LENGTH` characters cannot be stored by OAR: :func:`encode_oar` refuses it
with :class:`TagTooLong`, naming the parts to shorten.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

VERSION = 1
KEY = "malleable_job"
#: Longest comment read as a tag (characters); a longer one is refused unparsed.
MAX_LENGTH = 1024
#: Largest node count a tag may ask for.
MAX_NODES = 100_000
_KEYS = frozenset({KEY, "min", "max", "preferred", "app", "mpi", "sub", "copies", "user"})
_APP = re.compile(r"[A-Za-z0-9._-]{1,64}")
SUB_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")
#: Most sites one submission may be sent to (the ``copies`` key's upper bound).
MAX_COPIES = 32
#: The version part that starts an OAR job name carrying a tag.
OAR_VERSION = f"m{VERSION}"
#: Longest OAR job name (OAR 2.5's ``jobs.job_name`` is ``varchar(100)``).
OAR_MAX_LENGTH = 100
#: What a name claiming to be a compact tag starts with (any version).
_OAR_CLAIM = re.compile(r"m[0-9]+;")
#: A size in the compact form: decimal digits, no sign, no leading zero.
_OAR_INT = re.compile(r"0|[1-9][0-9]{0,11}")
_OAR_KEYS = ("min", "max", "pref", "app", "mpi", "sub", "n")
#: The parts of a compact tag whose length the user chooses, longest possible first.
_OAR_FREE = ("app", "sub")


@dataclass(frozen=True, slots=True)
class UserTag:
    """A valid tag: what the user asked for."""

    min_size: int
    max_size: int
    preferred: int | None = None
    app: str = "fixed"
    mpi: bool = False
    sub: str | None = None
    copies: int | None = None
    """How many sites the submission ``sub`` was sent to (None: not said)."""


class BadTag(ValueError):
    """A comment that claims to be a tag and is not a valid one."""


class TagTooLong(BadTag):
    """A valid tag whose OAR form is longer than OAR stores a job name."""

    def __init__(self, length: int, parts: dict[str, int]) -> None:
        self.length = length
        self.over = length - OAR_MAX_LENGTH
        #: The parts the user chose the length of (``app``, ``sub``) and their lengths.
        self.parts = parts
        shorten = " or ".join(f"{k} ({n} character{'s' * (n != 1)})" for k, n in parts.items())
        super().__init__(f"the OAR job name would be {length} characters, over OAR's "
                         f"{OAR_MAX_LENGTH}: shorten {shorten} by {self.over}")


def looks_like_tag(comment: str) -> bool:
    """Whether a comment claims to be a user tag (cheap test before parsing): an object, or
    any JSON-looking text naming the tag's key (a claim inside an array is parsed, refused
    and logged once, never silently skipped)."""
    start = comment.lstrip()[:1]
    return KEY in comment and (start in ("{", "[") or f'"{KEY}"' in comment)


def encode(tag: UserTag, user: str | None = None) -> str:
    """The comment for ``tag`` (compact JSON, no spaces: ``scontrol -o`` splits on them)."""
    body: dict[str, object] = {KEY: VERSION, "min": tag.min_size, "max": tag.max_size}
    if tag.preferred is not None:
        body["preferred"] = tag.preferred
    if tag.app != "fixed":
        body["app"] = tag.app
    if tag.mpi:
        body["mpi"] = True
    if tag.sub is not None:
        body["sub"] = tag.sub
    if tag.copies is not None:
        body["copies"] = tag.copies
    if user is not None:
        body["user"] = user
    text = json.dumps(body, separators=(",", ":"))
    check(tag)
    return text


def check(tag: UserTag) -> None:
    """BadTag unless the sizes and names are consistent."""
    for name, value in (("min", tag.min_size), ("max", tag.max_size)):
        if not 1 <= value <= MAX_NODES:
            raise BadTag(f"{name} must be in [1, {MAX_NODES}], not {value}")
    if tag.min_size > tag.max_size:
        raise BadTag(f"min {tag.min_size} is above max {tag.max_size}")
    if tag.preferred is not None and not tag.min_size <= tag.preferred <= tag.max_size:
        raise BadTag(f"preferred {tag.preferred} is outside [{tag.min_size}, {tag.max_size}]")
    if not _APP.fullmatch(tag.app):
        raise BadTag(f"app {tag.app[:70]!r} is not a model name")
    if tag.sub is not None and not SUB_ID.fullmatch(tag.sub):
        raise BadTag(f"sub {tag.sub[:40]!r} is not a submission id ([A-Za-z0-9_-]{{1,32}})")
    if tag.copies is not None:
        if tag.sub is None:
            raise BadTag("copies needs sub (the submission id its copies share)")
        if not 2 <= tag.copies <= MAX_COPIES:
            raise BadTag(f"copies must be in [2, {MAX_COPIES}], not {tag.copies}")


def parse(comment: str, owner: str) -> UserTag:
    """The tag of a job owned by ``owner`` (Slurm's user name); BadTag saying why not."""
    if len(comment) > MAX_LENGTH:
        raise BadTag(f"tag of {len(comment)} characters (at most {MAX_LENGTH})")
    try:
        body = json.loads(comment)
    except (json.JSONDecodeError, RecursionError):
        raise BadTag("tag is not valid JSON") from None
    if not isinstance(body, dict):
        raise BadTag("tag is not a JSON object")
    if type(body.get(KEY)) is not int or body.get(KEY) != VERSION:  # not 1.0, not true
        raise BadTag(f"tag version {str(body.get(KEY))[:20]!r} is not {VERSION}")
    unknown = sorted(str(k)[:20] for k in body if k not in _KEYS)
    if unknown:
        raise BadTag(f"unknown keys {', '.join(unknown)}; valid: {', '.join(sorted(_KEYS))}")
    claimed = body.get("user")
    if claimed is not None and claimed != owner:
        raise BadTag(f"tag names user {str(claimed)[:40]!r} but Slurm says the job is "
                     f"{owner!r}'s")
    tag = UserTag(_int(body, "min"), _int(body, "max"),
                  _int(body, "preferred") if "preferred" in body else None,
                  _text(body, "app", "fixed"), _flag(body, "mpi"),
                  _text(body, "sub", None) if "sub" in body else None,
                  _int(body, "copies") if "copies" in body else None)
    check(tag)
    return tag


def _int(body: dict[str, object], key: str) -> int:
    value = body.get(key)
    if value is None:
        raise BadTag(f"{key} is missing")
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadTag(f"{key} must be an integer, not {type(value).__name__}")
    return value


def _text(body: dict[str, object], key: str, default: str | None) -> str:
    value = body.get(key, default)
    if not isinstance(value, str):
        raise BadTag(f"{key} must be a string, not {type(value).__name__}")
    return value


def _flag(body: dict[str, object], key: str) -> bool:
    value = body.get(key, False)
    if not isinstance(value, bool):
        raise BadTag(f"{key} must be true or false, not {type(value).__name__}")
    return value


# ---------------------------------------------------------------- OAR's compact form


def looks_like_oar_tag(name: str) -> bool:
    """Whether an OAR job name claims to be a compact tag (``m<version>;...``); the
    adapter's own names (``m.RUN.JOB``) and a bare ``m1`` do not."""
    return _OAR_CLAIM.match(name) is not None


def encode_oar(tag: UserTag) -> str:
    """The OAR job name for ``tag``; BadTag if it is invalid, TagTooLong if OAR cannot
    store it (more than :data:`OAR_MAX_LENGTH` characters)."""
    check(tag)
    parts = [OAR_VERSION, f"min={tag.min_size}", f"max={tag.max_size}"]
    if tag.preferred is not None:
        parts.append(f"pref={tag.preferred}")
    if tag.app != "fixed":
        parts.append(f"app={tag.app}")
    if tag.mpi:
        parts.append("mpi")
    if tag.sub is not None:
        parts.append(f"sub={tag.sub}")
    if tag.copies is not None:
        parts.append(f"n={tag.copies}")
    text = ";".join(parts)
    if len(text) > OAR_MAX_LENGTH:
        free = {"app": len(tag.app) if tag.app != "fixed" else 0, "sub": len(tag.sub or "")}
        raise TagTooLong(len(text), {k: free[k] for k in _OAR_FREE if free[k]})
    return text


def parse_oar(name: str) -> UserTag:
    """The tag in an OAR job name; BadTag saying why not. The owner is not in the name:
    it is oarstat's ``owner`` of the job."""
    if len(name) > OAR_MAX_LENGTH:
        raise BadTag(f"name of {len(name)} characters (OAR stores at most {OAR_MAX_LENGTH})")
    version, *parts = name.split(";")
    if version != OAR_VERSION:
        raise BadTag(f"tag version {version[:20]!r} is not {OAR_VERSION!r}")
    body = _oar_parts(parts)
    tag = UserTag(_oar_int(body, "min"), _oar_int(body, "max"),
                  _oar_int(body, "pref") if "pref" in body else None,
                  body.get("app", "fixed"), "mpi" in body, body.get("sub"),
                  _oar_int(body, "n") if "n" in body else None)
    check(tag)
    return tag


def _oar_parts(parts: list[str]) -> dict[str, str]:
    """The ``key=value`` parts by key (``mpi`` as ``""``); BadTag on an unknown, repeated,
    empty or malformed part."""
    body: dict[str, str] = {}
    for part in parts:
        key, eq, value = part.partition("=")
        if key not in _OAR_KEYS:
            raise BadTag(f"unknown key {key[:20]!r}; valid: {', '.join(_OAR_KEYS)}")
        if key in body:
            raise BadTag(f"{key} is given twice")
        if (key == "mpi") == bool(eq):
            raise BadTag("mpi takes no value" if key == "mpi" else f"{key} needs a value")
        body[key] = value
    return body


def _oar_int(body: dict[str, str], key: str) -> int:
    value = body.get(key)
    if value is None:
        raise BadTag(f"{key} is missing")
    if not _OAR_INT.fullmatch(value):
        raise BadTag(f"{key} must be a decimal integer, not {value[:20]!r}")
    return int(value)
