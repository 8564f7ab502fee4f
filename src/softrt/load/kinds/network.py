"""The network load (load layer): short TCP connections over loopback.

stress-ng --sock (stress-ng(1)), or a built-in server and client (_worker.net_server, net_client).
"""

from __future__ import annotations

import socket

from ...cpus import CpuSet
from .._metrics_yaml import Metrics
from ..builtin import BuiltinLoad, Figure, Worker
from ..kind import LoadKind, register
from ..stressng import StressNgLoad, cpu_pct, rate


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stress_ng(cpus: CpuSet, **kw) -> StressNgLoad:
    """Network: a TCP client and server over loopback (stress-ng --sock, --sock-if lo).

    Each sock bogo op is one accepted connection over which the server sends a burst of data
    (stress-sock.c server loop), so bogo ops/s are connections/s. The port is picked free when
    the load starts (stress-ng's default, 5000, is often taken). stress-ng 0.15 still listens on
    the wildcard address (seen with ss(8)); its clients connect over 127.0.0.1.
    """

    def metrics(m: Metrics) -> dict[str, float]:
        return {"connections_per_s": rate(m, "sock"), "cpu_pct_per_worker": cpu_pct(m, "sock")}

    def args() -> list[str]:
        port = str(_free_loopback_port())
        return ["--sock", "1", "--sock-domain", "ipv4", "--sock-if", "lo", "--sock-port", port]

    load = StressNgLoad("network", cpus, args, metrics, **kw)
    load.notes.append("stress-ng listens on 0.0.0.0 (all interfaces) while it runs; its traffic uses 127.0.0.1")
    return load


#: The built-in workers' achieved figures.
FIGURES = (
    Figure("connections_per_s", ("server.connections",)),
    Figure("MB_per_s", ("server.bytes_received",), per=1e6),
    Figure("connect_errors_per_s", ("client.connect_errors",)),
)


def builtin(cpus: CpuSet, **kw) -> BuiltinLoad:
    """Network: a TCP server and a client flooding it with short connections over 127.0.0.1."""
    workers = [Worker("server", "net_server", cpus), Worker("client", "net_client", cpus)]
    return BuiltinLoad("network", cpus, FIGURES, workers, **kw)


register(LoadKind("network", 40, backends={"stress-ng": stress_ng, "builtin": builtin}))
