"""Reproductions of the published experiments, one subpackage per paper.

``koala/``, ``dmrlib/``, ``acds/`` and ``coorm/``; each has an ``experiment`` module,
named in :data:`EXPERIMENTS`, that exposes::

    def add_arguments(parser: argparse.ArgumentParser) -> None  # its own options
    def run(args: argparse.Namespace) -> int                     # exit code

and ``malleable experiment NAME`` dispatches to it (common options: ``--out DIR``,
``--json``).
"""

from __future__ import annotations

#: experiment name -> (module, one-line description)
EXPERIMENTS: dict[str, tuple[str, str]] = {
    "koala": ("malleable.experiments.koala.experiment",
              "KOALA FPSMA/EGS under PRA and PWA on DAS-3 (Figs. 7 and 8)"),
    "coorm": ("malleable.experiments.coorm.experiment",
              "CooRM views vs an OAR-like moldable scheduler (Figs. 6 and 7)"),
    "acds": ("malleable.experiments.acds.experiment",
             "AC-DS, AG-DS and EQUI-EQUI over scheduler trees (Figs. 4 to 8)"),
    "elastic": ("malleable.experiments.elastic.experiment",
                "malleability on a real log: a share of jobs made malleable (2026 study)"),
    "dmrlib": ("malleable.experiments.dmrlib.experiment",
               "DMRlib workload study: fixed, moldable, malleable, flexible jobs"),
}
