"""The discrete-event simulator: engine, simulated clusters, application models."""
