"""Click parameter types shared by the commands (CLI layer)."""

from __future__ import annotations

import click

from ..errors import ConfigError
from ..units import parse_time_ns


class TimeNs(click.ParamType):
    """A time such as ``250us`` or ``10s``, converted to integer nanoseconds."""

    name = "time"

    def __init__(self, default_unit: str) -> None:
        self.default_unit = default_unit

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        try:
            return parse_time_ns(value, default_unit=self.default_unit, what=param.opts[0] if param else "time")
        except ConfigError as err:
            self.fail(str(err), param, ctx)
