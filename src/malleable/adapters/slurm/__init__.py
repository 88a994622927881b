"""The Slurm adapter: parsers, commands, resizes and the :class:`SlurmCluster` resource manager.

See docs/slurm.md. Everything talks to Slurm through a
:class:`~malleable.adapters.shell.CommandRunner` (local or SSH), argv lists only.
"""

from malleable.adapters.slurm.cluster import SlurmCluster
from malleable.adapters.slurm.ctl import SlurmCtl
from malleable.adapters.slurm.payload import Payload
from malleable.adapters.slurm.resize import Outcome, Resizer, ResizeResult

__all__ = ["Outcome", "Payload", "ResizeResult", "Resizer", "SlurmCluster", "SlurmCtl"]
