"""Typed documents at the bottom of the house (schema layer: imports only errors, units and lazy).

What softrt writes and reads back: the run summary (:mod:`.summary`, with :mod:`.why_late` and the
device's report :mod:`.device`) on the frozen-dataclass base :mod:`.doc`; what one run does
(:mod:`.config`); the tail model of a series (:mod:`.tail`); text made safe to show or to use as a
name (:mod:`.text`). Producers in the layers above fill these by keyword; readers get attributes,
never dict keys.
"""

from ..lazy import lazy

# The models on first use: a reader of .text alone (the EtherCAT simulator, through the bounded
# JSON reader) need not build the summary's fifty classes (~40 ms).
__getattr__ = lazy(
    __name__,
    {
        "RunConfig": ".config",
        "SCHEMA": ".summary",
        "RunSummary": ".summary",
        "Tail": ".tail",
        "Interval": ".tail",
        "ReturnLevel": ".tail",
        "TailTest": ".tail",
    },
)

__all__ = ["SCHEMA", "Interval", "ReturnLevel", "RunConfig", "RunSummary", "Tail", "TailTest"]
