"""A run's provenance: which machine, firmware and network card measured it (schema layer).

What ``softrt fleet``, ``softrt diff`` and ``softrt fleet --regressions`` compare between runs, so
"what changed since it last passed" can be answered (OSADL QA farm: "the kernel version of the test
board is monitored along with all other data so any regression can be related to a possible kernel
upgrade"). Collected by :mod:`softrt.platform.provenance` from what the OS exposes without extra
tools: DMI (``/sys/class/dmi/id``, kernel ``Documentation/ABI/testing/sysfs-firmware-dmi-tables``),
``/proc/cpuinfo``'s microcode, the NIC's driver (ethtool's ETHTOOL_GDRVINFO, ``linux/ethtool.h``).

The kernel release, build, command line, preemption model and CPU model stay in the summary's
``host`` facts, where every run since the first has them; the tuning in force is the summary's
``tuning`` and ``check``. :func:`softrt.schema.rigfacts.rig_facts` joins the three into the flat view the fleet
commands compare. An absent block (a summary written before it) reads as None.
"""

from __future__ import annotations

from .doc import Doc, many, opt


class Nic(Doc):
    """The network card of an EtherCAT device (ethtool -i: driver, version, firmware-version, bus-info)."""

    interface: str = ""
    driver: str | None = None
    version: str | None = opt()
    firmware: str | None = opt()
    bus_info: str | None = opt()


class Provenance(Doc):
    """The rig and what the kernel's host facts do not name (None where the OS does not tell)."""

    rig_id: str | None = None  # platform.rig.rig_id: a hash of DMI product_uuid/board serial, else machine-id
    rig_label: str | None = None  # --rig-label / SOFTRT_RIG_LABEL
    bios_vendor: str | None = opt()
    bios_version: str | None = opt()
    bios_date: str | None = opt()
    product_name: str | None = opt()
    board_name: str | None = opt()
    microcode: str | None = opt()  # /proc/cpuinfo "microcode" of the first CPU (x86)
    nics: list[Nic] = many()
    tune_applied: list[str] | None = opt()  # what softrt tune --apply changed and has not reverted (audit.state)


#: The fields a change of which may explain a change of timing, in the order they are shown, and
#: whether ``softrt fleet --regressions`` names them as a cause (the others are shown, not blamed).
FIELDS = (
    "rig_id",
    "rig_label",
    "hostname",
    "product_name",
    "board_name",
    "cpu_model",
    "microcode",
    "bios_vendor",
    "bios_version",
    "bios_date",
    "kernel",
    "kernel_build",
    "preemption",
    "cmdline",
    "tuning",
    "nic",
    "softrt",
)
CAUSES = ("kernel", "kernel_build", "preemption", "cmdline", "microcode", "bios_version", "bios_date", "tuning", "nic")
