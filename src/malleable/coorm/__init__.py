"""CooRM: an RMS that gives application launchers views of resource availability.

After Klein and Pérez, "An RMS Architecture for Efficiently Supporting
Complex-Moldable Applications" (docs/coorm.md). Parts:

* :mod:`~malleable.coorm.profile`   cluster availability profiles (CAPs)
* :mod:`~malleable.coorm.protocol`  the launcher <-> RMS messages and their JSON schema
* :mod:`~malleable.coorm.policy`    the pure RMS policy (FCFS + repeated CBF)
* :mod:`~malleable.coorm.core`      the RMS state machine (re-policy interval, fair-start, kills)
* :mod:`~malleable.coorm.launchers` launchers and their memoized selection
* :mod:`~malleable.coorm.sim`       the in-process service, simulated on :mod:`malleable.sim.engine`
* :mod:`~malleable.coorm.oar`       the OAR-like moldable CBF baseline
* :mod:`~malleable.coorm.service`   the network service; :mod:`~malleable.coorm.client` launchers
* :mod:`~malleable.coorm.launch`    ``python -m malleable.coorm.launch``: one launcher process

Elsewhere: the workloads W0-W3, the legacy-job model and the application models in
:mod:`malleable.workloads.coorm` and :mod:`malleable.workloads.coorm_apps`; the CLI in
:mod:`malleable.commands.coorm`.
"""
