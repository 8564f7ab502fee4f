"""Typed documents at the bottom of the house (schema layer: imports only errors and units).

What softrt writes and reads back: the run summary (:mod:`.summary`, with :mod:`.why_late` and the
device's report :mod:`.device`) on the frozen-dataclass base :mod:`.doc`; what one run does
(:mod:`.config`); text made safe to show or to use as a name (:mod:`.text`). Producers in the layers
above fill these by keyword; readers get attributes, never dict keys.
"""

_WHERE = {"RunConfig": "config", "SCHEMA": "summary", "RunSummary": "summary"}


def __getattr__(name: str):
    """The models on first use (PEP 562): a reader of :mod:`.text` alone (the EtherCAT simulator,
    through the bounded JSON reader) need not build the summary's fifty classes (~40 ms)."""
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["SCHEMA", "RunConfig", "RunSummary"]
