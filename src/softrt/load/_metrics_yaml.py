"""Reading stress-ng's ``--yaml`` report (load layer, pure).

stress-ng(1) ``--yaml FILE`` writes ``system-info:`` and ``metrics:`` sections; each metrics item
is one stressor with flat ``key: value`` lines (``bogo-ops-per-second-real-time``,
``cpu-usage-per-instance``, and stressor extras such as hdd's ``mbsec-write-rate``).
"""

from __future__ import annotations

# stress-ng's "MB" is 1 << 20 bytes (stress-ng.h); softrt's MB is 10**6.
MIB_TO_MB = (1 << 20) / 1e6

Metrics = dict[str, dict[str, float]]  # stressor name -> its YAML metrics


def parse_metrics_yaml(text: str) -> Metrics:
    """Return the ``metrics:`` section of a stress-ng ``--yaml`` file, by stressor.

    The file is flat and generated (two levels, ``key: value``), so a few lines of parsing
    avoid a PyYAML dependency. Non-numeric values are ignored.
    """
    out: Metrics = {}
    current: dict[str, float] | None = None
    in_metrics = False
    for raw in text.splitlines():
        line = raw.strip()
        if not raw.startswith(" ") and line:
            in_metrics = line == "metrics:"
            current = None
            continue
        if not in_metrics or ":" not in line:
            continue
        if line.startswith("- stressor:"):
            current = out.setdefault(line.split(":", 1)[1].strip(), {})
            continue
        if current is not None:
            key, _, value = line.partition(":")
            try:
                current[key.strip()] = float(value.strip().strip("'\""))
            except ValueError:
                pass
    return out
