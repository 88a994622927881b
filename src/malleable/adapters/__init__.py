"""Resource-manager adapters: the simulator's clusters, Slurm, OAR."""
