"""Reproductions of the published experiments, one subpackage per paper.

``koala/``, ``dmrlib/``, ``acds/``, ``coorm/`` and ``elastic/``; each has an ``options``
module and an ``experiment`` module (named in :data:`EXPERIMENTS`)::

    options.add_arguments(parser: argparse.ArgumentParser) -> None  # its own options
    experiment.run(args: argparse.Namespace) -> int                  # exit code

and ``malleable experiment NAME`` dispatches to them (common options: ``--out DIR``,
``--json``, and :mod:`.executor_options`). ``options`` imports nothing heavy (no
simulator, numpy or plotting library): it is what ``--help`` loads.
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
