"""Run directories on disk and the run summary's model (store layer)."""

from ..lazy import lazy

# The run directory and the summary's model on first use: they bring numpy, pyarrow and some fifty
# model classes (~150 ms), which the modules beside them (validate, history) and their users (the
# EtherCAT simulator) do without.
__getattr__ = lazy(
    __name__,
    {
        **{name: ".rundir" for name in ("RunDir", "new_run_id", "read_samples", "read_summary")},
        "SCHEMA": "..schema.summary",
        "RunSummary": "..schema.summary",
    },
)

__all__ = ["SCHEMA", "RunDir", "RunSummary", "new_run_id", "read_samples", "read_summary"]
