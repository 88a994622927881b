"""The AC-DS paper: AC-DS, AG-DS and EQUI-EQUI over scheduler trees, Figs. 4 to 8.

``experiment`` is the entry point (``malleable experiment acds``); ``plan`` runs the
scenarios, ``report`` measures, ``figures`` and ``markdown`` write the results.
"""
