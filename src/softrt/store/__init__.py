"""Run directories on disk and the run summary's model (store layer)."""

from .rundir import RunDir, new_run_id, read_samples, read_summary
from ..schema.summary import SCHEMA, RunSummary

__all__ = ["SCHEMA", "RunDir", "RunSummary", "new_run_id", "read_samples", "read_summary"]
