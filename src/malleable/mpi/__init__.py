"""Malleable mpi4py applications in the spirit of DMRlib.

Importing this package does not import mpi4py; creating a :class:`Malleable` does
(install the ``mpi`` extra: ``pip install 'malleable[mpi]'``). See docs/mpi.md.
"""

from malleable.mpi.channel import FileChannel
from malleable.mpi.handover import Callbacks, Data, Handover
from malleable.mpi.layouts import Block, BlockCyclic, Layout, block_counts
from malleable.mpi.params import Inhibitors, Outcome, Params
from malleable.mpi.session import Malleable
from malleable.mpi.sources import DmrSource, Offer, Point, Report, ResizeSource, Resources, Scripted

__all__ = [
    "Block",
    "BlockCyclic",
    "Callbacks",
    "Data",
    "DmrSource",
    "FileChannel",
    "Handover",
    "Inhibitors",
    "Layout",
    "Malleable",
    "Offer",
    "Outcome",
    "Params",
    "Point",
    "Report",
    "ResizeSource",
    "Resources",
    "Scripted",
    "block_counts",
]
