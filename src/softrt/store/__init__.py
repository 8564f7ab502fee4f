"""Run directories on disk and the run summary's model (store layer)."""

_RUNDIR = ("RunDir", "new_run_id", "read_samples", "read_summary")
_SUMMARY = ("SCHEMA", "RunSummary")


def __getattr__(name: str):
    """The run directory and the summary's model on first use (PEP 562): they bring numpy, pyarrow
    and some fifty model classes (~150 ms), which the modules beside them (validate, history) and
    their users (the EtherCAT simulator) do without."""
    if name in _RUNDIR:
        from . import rundir

        return getattr(rundir, name)
    if name in _SUMMARY:
        from ..schema import summary

        return getattr(summary, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["SCHEMA", "RunDir", "RunSummary", "new_run_id", "read_samples", "read_summary"]
