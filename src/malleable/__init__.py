"""malleable: schedule malleable parallel jobs across Slurm and OAR clusters."""

__version__ = "0.1.0"
