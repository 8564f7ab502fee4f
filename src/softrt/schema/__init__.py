"""Typed documents at the bottom of the house (schema layer: imports only errors and units).

What softrt writes and reads back: the run summary (:mod:`.summary`, with :mod:`.why_late` and the
device's report :mod:`.device`) on the frozen-dataclass base :mod:`.doc`; what one run does
(:mod:`.config`); text made safe to show or to use as a name (:mod:`.text`). Producers in the layers
above fill these by keyword; readers get attributes, never dict keys.
"""

from .config import RunConfig
from .summary import SCHEMA, RunSummary

__all__ = ["SCHEMA", "RunConfig", "RunSummary"]
