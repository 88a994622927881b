"""The SWF status codes (field 11) by name, as the readers count them in a summary's
``trace`` object (docs/workloads.md, "Real logs"): a module of its own, so that the line
readers (:mod:`~malleable.workloads.swf`, :mod:`~malleable.workloads.swf_plain`) and the
rules for real logs (:mod:`~malleable.workloads.swf_log`) share it without a cycle."""

from __future__ import annotations

#: SWF status codes (field 11), as the archive defines them, by name in the counts.
STATUS_NAMES = {1: "status_completed", 0: "status_failed", 5: "status_cancelled",
                2: "status_partial", 3: "status_partial", 4: "status_partial",
                -1: "status_unknown"}
