"""The DMRlib workload study (Iserte et al.): fixed, moldable, malleable, flexible jobs.

``experiment`` is the entry point (``malleable experiment dmrlib``); ``study`` runs the
simulations, ``results`` holds what a study ran, ``report`` computes its key numbers and
Table 7, ``text`` writes report.md and ``plots`` the figures.
"""
