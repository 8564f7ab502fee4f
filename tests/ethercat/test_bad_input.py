"""Bad input (EcatInputError, exit status 2) and bring-up failures (EcatError, exit 1).

Either way: one clear error with what was seen, and the bus left safe.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from softrt.errors import ConfigError
from softrt.ethercat import EcatError
from softrt.ethercat.master import EtherCATMaster, MasterState, open_device

PERIOD_NS = 250_000


def open_in(ns, **options):
    options.setdefault("receive_timeout_us", 200_000)
    # A master in the test's own process (SCHED_OTHER, beside the suite's other work on the
    # housekeeping CPU) may pause past the slaves' default 100 ms SM watchdog: as test_master's do.
    options.setdefault("watchdog_ms", 1000)
    dev = EtherCATMaster(ns.master_iface, PERIOD_NS, 1, **options)
    with ns.inside():
        dev.open()
    return dev


def test_missing_interface():
    with pytest.raises(EcatError) as info:
        open_device("ethercat:nosuch0", PERIOD_NS)
    assert info.value.reason == "no_interface"
    assert isinstance(info.value, ConfigError)  # the CLI maps it to exit status 2
    assert "\n" not in str(info.value) and "nosuch0" in str(info.value)


def test_bad_device_spec():
    with pytest.raises(ConfigError, match="ethercat:IFACE"):
        open_device("ethercat", PERIOD_NS)


def test_interface_down(ecat_ns):
    ecat_ns.ip("link", "set", ecat_ns.master_iface, "down")
    with pytest.raises(EcatError) as info:
        open_in(ecat_ns)
    assert info.value.reason == "interface_down"
    assert f"ip link set {ecat_ns.master_iface} up" in str(info.value)


def test_no_slaves_answering(ecat_ns):
    with pytest.raises(EcatError) as info:
        open_in(ecat_ns)
    assert info.value.reason == "no_slaves"
    assert not isinstance(info.value, ConfigError)  # a bus that does not answer is not bad input: exit 1
    assert info.value.seen["config_init"] <= 0


def test_unsupported_drive_leaves_bus_in_init(start_sim, ecat_ns):
    sim = start_sim("--slaves", "1", "--device", "io-16di")
    with pytest.raises(EcatError) as info:
        open_in(ecat_ns)
    err = info.value
    assert err.reason == "unsupported_drive"
    assert "0x6040" in str(err) and "softrt virtual 16DI" in str(err)
    assert sim.stats()["slaves"][0]["al_state"] == "INIT"


def test_slave_refusing_op_is_reported_with_state_and_code(start_sim, ecat_ns):
    sim = start_sim("--slaves", "2", fifo=True)  # (a stalled simulator is a silent bus, not a refusal)
    sim.control(cmd="refuse_state", state="OP", slave=1, code=0x001A)  # synchronization error
    with pytest.raises(EcatError) as info:
        open_in(ecat_ns, state_timeout_s=0.5)
    err = info.value
    assert err.reason == "state_timeout", str(err)
    assert "SAFEOP+ERR, AL status code 0x001A" in str(err)
    assert err.seen["slave 0 'softrt virtual CSP drive'"] == "OP"
    assert [s["al_state"] for s in sim.stats()["slaves"]] == ["INIT", "INIT"]  # acknowledged, safe


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv (util-linux)")
def test_no_raw_socket_privilege():
    # Drop CAP_NET_RAW from the bounding set: even root then cannot open a raw socket.
    code = (
        "from softrt.ethercat import EcatError, open_device\n"
        "try:\n    open_device('ethercat:lo', 250000)\nexcept EcatError as e:\n    print(e.reason)\n"
    )
    out = subprocess.run(
        ["setpriv", "--bounding-set=-net_raw", sys.executable, "-c", code], capture_output=True, text=True
    )
    assert out.stdout.strip() == "permission", out.stderr


def test_ecat_sim_cli_bad_interface():
    out = subprocess.run(
        [sys.executable, "-m", "softrt", "ecat-sim", "--iface", "nosuch0"], capture_output=True, text=True
    )
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "softrt: error: EtherCAT on nosuch0: no such network interface (list interfaces with 'ip link')"
    ]


def test_ecat_sim_delay_is_a_time(run_cli):
    code, out, err = run_cli("ecat-sim", "--iface", "nosuch0", "--delay", "2 fortnights")
    assert code == 2 and out == "" and err.count("\n") == 1 and "--delay '2 fortnights' has an unknown unit" in err


def test_ecat_sim_watchdog_out_of_the_register_s_range_is_bad_input(run_cli):
    code, out, err = run_cli("ecat-sim", "--iface", "nosuch0", "--sm-watchdog", "10s")
    assert code == 2 and out == "" and err.count("\n") == 1 and "--sm-watchdog: 1 ms to 6.5 s" in err


def test_device_state_errors():
    dev = EtherCATMaster("nosuch0", PERIOD_NS)
    assert dev.state is MasterState.CLOSED
    dev.stop()  # harmless when closed
    with pytest.raises(ConfigError):
        EtherCATMaster("x", 0)


@pytest.mark.parametrize(
    "content, device, says",
    [
        ('[defaults]\nrx = ["0x6040/16"]\n', "ethercat:nosuch0", "rx: lacks 0x607A/32"),
        ("[defaults\n", "ethercat:nosuch0", "is not valid TOML"),
        (b"\x00\xff" * 100, "ethercat:nosuch0", "is not UTF-8 text"),
        ("", "virtual", "--ecat-drives describes EtherCAT drives"),
    ],
)
def test_a_bad_drive_description_is_one_line_and_exit_2(tmp_path, content, device, says):
    drives = tmp_path / "drives.toml"
    drives.write_bytes(content if isinstance(content, bytes) else content.encode())
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "softrt",
            "run",
            "--device",
            device,
            "--ecat-drives",
            str(drives),
            "--duration",
            "1s",
            "--out-dir",
            str(tmp_path / "runs"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "SOFTRT_STATE_DIR": str(tmp_path / "s")},
        timeout=60,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], proc.stderr
    assert not (tmp_path / "runs").exists()


def test_a_bus_that_dies_in_the_scan_ends_bring_up_in_seconds(start_sim, ecat_ns):
    """The slaves fall silent at the first EEPROM read, inside SOEM's config_init (one C call, which
    read SII categories of zeros for 70 s): the scan's deadline cuts SOEM's waits short, and the
    step says where it was and that the bus is silent."""
    start_sim("--slaves", "2", "--mute-at", "eeprom", fifo=True)
    t = time.monotonic()
    with pytest.raises(EcatError) as info:
        open_in(ecat_ns)
    took_s = time.monotonic() - t
    assert info.value.reason == "bus_lost"
    assert str(info.value).startswith("EtherCAT on ecm0: bring-up, step scan: the bus went silent (no slave answers)")
    assert took_s < 20  # seconds, not minutes
    import pysoem  # SOEM's timeouts are back as they were (the patient ones of this test)

    assert pysoem.settings.timeouts.eeprom == 200_000
