"""The runner: launches malleable MPI programs in Slurm jobs and keeps processes and
allocation in step (KOALA's Malleable Runner, section V-A). See docs/mpi.md."""
