"""Loaded by every Python process the MPI tests start (tests/fakes/mpirun.py puts this
directory on PYTHONPATH): SIGUSR1 prints the process's stacks, before mpi4py's import
even, so that a hung run says where each rank was (a parent in ``MPI_Comm_spawn``, a
child still in ``MPI_Init``)."""

import faulthandler
import signal

faulthandler.register(signal.SIGUSR1, all_threads=True)
