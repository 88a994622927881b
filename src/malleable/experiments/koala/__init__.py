"""The KOALA paper (Buisson et al.): malleability in multicluster grids, Figs. 7 and 8.

``experiment`` is the entry point (``malleable experiment koala``); ``runs`` simulates,
``stats`` and ``findings`` measure, ``plots`` and ``report`` write the results.
"""
