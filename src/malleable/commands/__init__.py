"""Subcommands of the malleable CLI, one module per family."""
