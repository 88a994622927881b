"""Per-job and platform metrics, plots and reports."""
