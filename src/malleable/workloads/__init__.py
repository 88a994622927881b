"""Workloads: generators (KOALA, ...) and the SWF reader/writer."""
