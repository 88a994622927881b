"""Test fakes and builders shared by the test modules (no test module imports another).

* :mod:`builders`: small JobSpec/ClusterView builders and a driver for policy decisions;
* :mod:`slurm`: a fake Slurm site answering in Slurm 22.05's formats;
* :mod:`mpi_site`: a fake site for the MPI runner (one job, node files, an application);
* :mod:`scripted`: a scripted resource manager and policy for the manager's tests;
* :mod:`mpirun`: running real MPI programs on this host, bounded in time;
* :mod:`waits`: unique testbed names and waits on monotonic deadlines.
"""
