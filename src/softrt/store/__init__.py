"""Run directories on disk (store layer)."""

from .rundir import SCHEMA, RunDir, new_run_id, read_samples, read_summary

__all__ = ["SCHEMA", "RunDir", "new_run_id", "read_samples", "read_summary"]
