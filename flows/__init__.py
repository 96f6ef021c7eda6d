"""Orchestration for ptm: Prefect flows and the `ptm` command line."""
