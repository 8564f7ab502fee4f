"""``softrt ecat-sim``: virtual EtherCAT slaves answering real frames on an interface (CLI layer)."""

from __future__ import annotations

import signal
import sys

import click

from ..ecatsim.control import MUTE_EVENTS
from ..ecatsim.faults import CORRUPTIONS
from ..schema.text import printable
from .options import time_option


@click.command(
    "ecat-sim",
    epilog="""\b
Examples (root; a veth pair, the master on one end):
  ip link add ecat0 type veth peer name ecat1 && ip link set ecat0 up && ip link set ecat1 up
  taskset -c 0 chrt -f 10 softrt ecat-sim --iface ecat1 --slaves 2 --busy-poll 60us &
  softrt run --device ethercat:ecat0 --axes 2 --bus-timeout 100ms   # the seed's 250 µs
  softrt ecat-sim --iface ecat1 --delay-every 1000 --delay 2ms
  softrt ecat-sim --iface ecat1 --mute-at sii          # a bus that dies during bring-up""",
)
@click.option("--iface", required=True, help="Interface to answer on (e.g. one end of a veth pair).")
@click.option("--slaves", type=click.IntRange(1, 64), default=1, show_default=True, help="Slaves in the chain.")
@click.option(
    "--device",
    "devices",
    multiple=True,
    default=("csp-drive",),
    show_default=True,
    help="Built-in description per slave (csp-drive, csp-drive-coe, io-16di); the last repeats.",
)
@click.option(
    "--control", "control_path", default=None, help="UNIX datagram socket for fault injection and state queries (JSON)."
)
@click.option("--drop-every", type=click.IntRange(0), default=0, help="Drop every N-th process-data frame.")
@click.option(
    "--bad-wkc-every", type=click.IntRange(0), default=0, help="Make one slave miss every N-th process-data frame."
)
@click.option("--delay-every", type=click.IntRange(0), default=0, help="Delay every N-th process-data reply.")
@time_option("--delay", "2ms", "Delay of a delayed reply (bare number: µs; at most 10 s).", unit="us")
@click.option(
    "--bad-frame-every",
    type=click.IntRange(0),
    default=0,
    help="Answer every N-th process-data frame changed (see --bad-frame).",
)
@click.option(
    "--bad-frame",
    "bad_frame",
    type=click.Choice(CORRUPTIONS),
    default="command",
    show_default=True,
    help="How a bad frame is changed: its process-data command, its length field, or cut short.",
)
@click.option(
    "--mute-at",
    type=click.Choice(MUTE_EVENTS),
    default="off",
    show_default=True,
    help="Fall silent (a bus that dies) at this point of the master's bring-up: its first EEPROM read, "
    "PRE-OP, its SII read in PRE-OP, the PDO mapping, SAFE-OP, OP; or now.",
)
@click.option(
    "--dc-drift-ppm",
    "drift_ppm",
    type=click.FloatRange(-1000, 1000),
    multiple=True,
    help="DC quartz error of slave 0, 1, … in ppm (repeat per slave; unlisted slaves run true).",
)
@click.option(
    "--axes-per-slave",
    type=click.IntRange(1, 8),
    default=1,
    show_default=True,
    help="CiA 402 axes per drive (axis n's objects at +n*0x800, its PDOs at +n*0x10).",
)
@time_option(
    "--busy-poll",
    "0",
    unit="us",
    help="Busy-poll this long either side of the moment the next process-data frame is due "
    "(learned from the last ones) instead of sleeping: a sleeping process answers tens of µs "
    "later on a virtual machine (bare number: µs; 0: always sleep; at most 10 ms).",
)
@time_option(
    "--sm-watchdog",
    "100ms",
    unit="ms",
    dest="watchdog_ns",
    help="Each slave's process-data (SM) watchdog after power-up: a slave in OP that gets no "
    "process data for this long drops to SAFEOP+ERR 0x001B (a master may program another; "
    "100 µs steps, 1 ms to 6.5 s).",
)
@click.option("--fixed-pdos", is_flag=True, help="CoE drives refuse PDO assignment by SDO (read-only 0x1C12/0x1C13).")
@click.option(
    "--ca-abort",
    is_flag=True,
    help="CoE drives announce SDO complete access but answer it with an abort (as some real ones do).",
)
def command(
    iface,
    slaves,
    devices,
    control_path,
    drop_every,
    bad_wkc_every,
    delay_every,
    delay_ns,
    bad_frame_every,
    bad_frame,
    mute_at,
    drift_ppm,
    axes_per_slave,
    busy_poll_ns,
    watchdog_ns,
    fixed_pdos,
    ca_abort,
):
    """Simulate N EtherCAT slaves (CiA 402 CSP drives by default) on IFACE until Ctrl-C."""
    import dataclasses

    from ..ecatsim.sim import Simulator, serve
    from ..ethercat.description import builtin

    try:
        descs = [builtin(devices[min(i, len(devices) - 1)], axes_per_slave) for i in range(slaves)]
    except KeyError as err:
        raise click.BadParameter(str(err.args[0]), param_hint="--device") from None
    if len(drift_ppm) > slaves:
        raise click.BadParameter(f"{len(drift_ppm)} values for {slaves} slave(s)", param_hint="--dc-drift-ppm")
    if delay_ns > 10_000_000_000:
        raise click.BadParameter("at most 10 s", param_hint="--delay")
    if busy_poll_ns > 10_000_000:
        raise click.BadParameter("at most 10 ms", param_hint="--busy-poll")
    if not 1_000_000 <= watchdog_ns <= 6_553_500_000:
        raise click.BadParameter("1 ms to 6.5 s (0x0420 counts 100 µs steps in 16 bits)", param_hint="--sm-watchdog")
    if fixed_pdos:
        descs = [dataclasses.replace(d, pdo_assignable=False) for d in descs]
    sim = Simulator(descs, drift_ppm=drift_ppm, ca_abort=ca_abort, watchdog_ns=watchdog_ns)
    for kind, every in (
        ("drop", drop_every),
        ("bad_wkc", bad_wkc_every),
        ("delay", delay_every),
        ("bad_frame", bad_frame_every),
    ):
        if every:
            sim.faults.set_every(kind, every, delay_us=round(delay_ns / 1000), corrupt=bad_frame)
    sim.mute_at = mute_at
    stopping = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.append(True))

    def ready() -> None:
        click.echo(printable(f"ecat-sim: {slaves} slave(s) answering on {iface}"), err=False)
        sys.stdout.flush()

    serve(sim, iface, control_path, stop=lambda: bool(stopping), on_ready=ready, busy_poll_ns=busy_poll_ns)
    s = sim.stats()
    answer, wait = s.answer_us, s.wait_us
    click.echo(
        printable(
            f"ecat-sim: stopped after {s.frames} frames ({s.pd_frames} process data; injected "
            + ", ".join(f"{k} {v}" for k, v in s.injected.items())
            + ")"
            + (
                f"; answered process data in p50 {answer['p50']} µs, p99 {answer['p99']}, max "
                f"{answer['max']} from its arrival (waiting to be read: p50 {wait['p50']} µs, "
                f"p99 {wait['p99']})"
                if answer
                else ""
            )
        )
    )
    return 0
