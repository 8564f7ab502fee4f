"""Kernel tracing of the RT CPU during a run (a part: rank of ``loop``, ``audit``).

``tracefs`` finds or mounts tracefs and manages private instances (and removes the ones a killed
softrt left); ``parse`` turns ``trace_pipe`` text into ``analysis.events.TraceEvent``s;
``consumer`` streams the pipe on the housekeeping CPU; ``session`` ties them to one run and to
the attribution (``analysis.attribution``). See docs/trace.md.
"""

from .session import TraceSession
from .tracefs import TracingUnavailable, sweep_orphans

__all__ = ["TraceSession", "TracingUnavailable", "sweep_orphans"]
