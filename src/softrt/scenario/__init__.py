"""Scenarios: a run configuration plus the loads that run beside it (session layer)."""

from .model import LoadSpec, Scenario
from .parse import BUILTIN_NAMES, load_scenario, parse_scenario

__all__ = ["BUILTIN_NAMES", "LoadSpec", "Scenario", "load_scenario", "parse_scenario"]
