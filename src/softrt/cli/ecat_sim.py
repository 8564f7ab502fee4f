"""``softrt ecat-sim``: virtual EtherCAT slaves answering real frames on an interface (CLI layer)."""

from __future__ import annotations

import signal
import sys

import click

from .options import TimeNs


@click.command("ecat-sim", epilog="""\b
Examples (root; a veth pair, the master on one end):
  ip link add ecat0 type veth peer name ecat1 && ip link set ecat0 up && ip link set ecat1 up
  softrt ecat-sim --iface ecat1 --slaves 2 &
  softrt run --device ethercat:ecat0 --axes 2
  softrt ecat-sim --iface ecat1 --delay-every 1000 --delay 2ms""")
@click.option("--iface", required=True, help="Interface to answer on (e.g. one end of a veth pair).")
@click.option("--slaves", type=click.IntRange(1, 64), default=1, show_default=True, help="Slaves in the chain.")
@click.option("--device", "devices", multiple=True, default=("csp-drive",), show_default=True,
              help="Built-in description per slave (csp-drive, csp-drive-coe, io-16di); the last repeats.")
@click.option("--control", "control_path", default=None,
              help="UNIX datagram socket for fault injection and state queries (JSON).")
@click.option("--drop-every", type=int, default=0, help="Drop every N-th process-data frame.")
@click.option("--bad-wkc-every", type=int, default=0, help="Make one slave miss every N-th process-data frame.")
@click.option("--delay-every", type=int, default=0, help="Delay every N-th process-data reply.")
@click.option("--delay", "delay_ns", type=TimeNs("us"), default="2ms", show_default=True,
              help="Delay of a delayed reply (bare number: µs).")
@click.option("--dc-drift-ppm", "drift_ppm", type=click.FloatRange(-1000, 1000), multiple=True,
              help="DC quartz error of slave 0, 1, … in ppm (repeat per slave; unlisted slaves run true).")
@click.option("--axes-per-slave", type=click.IntRange(1, 8), default=1, show_default=True,
              help="CiA 402 axes per drive (axis n's objects at +n*0x800, its PDOs at +n*0x10).")
@click.option("--fixed-pdos", is_flag=True, help="CoE drives refuse PDO assignment by SDO (read-only 0x1C12/0x1C13).")
@click.option("--ca-abort", is_flag=True,
              help="CoE drives announce SDO complete access but answer it with an abort (as some real ones do).")
def command(iface, slaves, devices, control_path, drop_every, bad_wkc_every, delay_every, delay_ns, drift_ppm,
            axes_per_slave, fixed_pdos, ca_abort):
    """Simulate N EtherCAT slaves (CiA 402 CSP drives by default) on IFACE until Ctrl-C."""
    import dataclasses

    from ..ethercat.description import builtin
    from ..ecatsim.sim import Simulator, serve

    try:
        descs = [builtin(devices[min(i, len(devices) - 1)], axes_per_slave) for i in range(slaves)]
    except KeyError as err:
        raise click.BadParameter(str(err.args[0]), param_hint="--device") from None
    if len(drift_ppm) > slaves:
        raise click.BadParameter(f"{len(drift_ppm)} values for {slaves} slave(s)", param_hint="--dc-drift-ppm")
    if fixed_pdos:
        descs = [dataclasses.replace(d, pdo_assignable=False) for d in descs]
    sim = Simulator(descs, drift_ppm=drift_ppm, ca_abort=ca_abort)
    for kind, every in (("drop", drop_every), ("bad_wkc", bad_wkc_every), ("delay", delay_every)):
        if every:
            sim.faults.set_every(kind, every, delay_us=round(delay_ns / 1000))
    stopping = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.append(True))

    def ready() -> None:
        click.echo(f"ecat-sim: {slaves} slave(s) answering on {iface}", err=False)
        sys.stdout.flush()

    serve(sim, iface, control_path, stop=lambda: bool(stopping), on_ready=ready)
    s = sim.stats()
    click.echo(f"ecat-sim: stopped after {s['frames']} frames ({s['pd_frames']} process data; injected "
               + ", ".join(f"{k} {v}" for k, v in s["injected"].items()) + ")")
    return 0
