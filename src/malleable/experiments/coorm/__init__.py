"""The CooRM paper (Klein and Pérez): views vs an OAR-like moldable scheduler, Figs. 6 and 7.

``experiment`` is the entry point (``malleable experiment coorm``); ``runs`` simulates,
``figures`` and ``report`` write the results.
"""
