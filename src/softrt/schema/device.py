"""The ``board`` block of a run's summary: the device's own report, typed (store layer).

The virtual board reports its writes and missed updates. The EtherCAT master
(:mod:`softrt.ethercat.master`) adds its frames, the bus's health, each drive as the run's last
valid frame confirmed it, and the distributed clocks (:mod:`softrt.ethercat.dcmonitor`); the
fields are described in docs/run-format.md (``board``) and docs/ethercat.md.
"""

from __future__ import annotations

from typing import Any

from .doc import MAX_US, Doc, count, key, many, opt, within


class Drive(Doc):
    """One EtherCAT drive axis as the run's last valid frame confirmed it (``confirmed_cycle`` -1:
    none), not what the disable sequence read after it."""

    name: str | None = None
    slave: int | None = count()
    axis: int | None = count(omit_none=True)  # the CiA 402 axis of a multi-axis drive (objects at +axis*0x800)
    statusword: int | None = count()
    state: str | None = None
    position_counts: int | None = None
    origin_counts: int | None = None
    error_code: int | None = count()
    confirmed_cycle: int | None = opt()
    confirmed_at_s: float | None = opt()


class Slave(Doc):
    """One EtherCAT slave's identity (0x1018, 0x1008), where its PDOs came from and its errors
    (0x1001 error register; 0x603F per axis), as bring-up read them (ethercat.bringup, ethercat.preop)."""

    position: int | None = count()
    name: str | None = None
    vendor_id: int | None = count()
    product_code: int | None = count()
    revision: int | None = count()
    serial: int | None = count()
    device_name: str | None = None
    axes: int | None = count()
    pdo: str | None = None  # e.g. "assigned by SDO", "the drive's own (SII)"
    error_register: int | None = count()
    error_codes: list[int | None] = many()  # per axis; None: the axis has no 0x603F


class Emergency(Doc):
    """A CoE emergency message a slave sent (CiA 301 §7.2.7: error code, error register, 5 data bytes)."""

    slave: int | None = count()
    error_code: int | None = count()
    error_register: int | None = count()
    data: str | None = None  # the manufacturer-specific bytes, hex


class LateRoundTrip(Doc):
    """Round trips of the replies that came after their deadline, in µs (send to kernel receive)."""

    min: float | None = within(MAX_US)
    max: float | None = within(MAX_US)
    mean: float | None = within(MAX_US)
    p50: float | None = within(MAX_US)
    p99: float | None = within(MAX_US)


class Frames(Doc):
    """What became of each cyclic frame (ethercat.cyclic): answered by its own reply in time, or
    not; the replies that came late, twice, changed (by kind) or from elsewhere."""

    sent: int | None = count()
    answered: int | None = count()
    unanswered: int | None = count()
    late: int | None = count()
    late_rtt_us: LateRoundTrip | None = None
    duplicates: int | None = count()
    bad: dict[str, int] | None = None  # {"command": n, "length": n, "short": n, "address": n, "index": n, "tag": n}
    foreign: int | None = count()
    send_errors: int | None = count()


class HostGaps(Doc):
    """Writes that came whole windows late (the host stalled; no frame went out in those windows)."""

    gaps: int | None = key("count", min=0)
    cycles: int | None = count()


class RoundTrip(Doc):
    """The EtherCAT frames' round trip in µs (frames answered in time by their own reply)."""

    min: float | None = within(MAX_US)
    median: float | None = within(MAX_US)
    max: float | None = within(MAX_US)


class DcReference(Doc):
    """The reference clock: the first DC slave."""

    slave: int | None = count()
    name: str | None = None


class Sync0(Doc):
    """SYNC0 of the drive the frame must meet (0x0981 activation, 0x09A0 cycle, 0x0990 start)."""

    active: bool | None = None
    cycle_ns: int | None = count()
    start_ns: int | None = None


class Phase(Doc):
    """Where each cycle's frame passed the reference clock, against SYNC0 + the shift (µs)."""

    n: int | None = count()
    mean_us: float | None = None
    min_us: float | None = None
    max_us: float | None = None
    p1_us: float | None = None
    p50_us: float | None = None
    p99_us: float | None = None
    abs_mean_us: float | None = None
    abs_p99_us: float | None = None
    abs_max_us: float | None = None
    resolution_us: float | None = None


class PhaseLock(Doc):
    """The host cycle's phase lock to SYNC0 (``--dc-lock``): a PI controller's gains and what it did."""

    kp: float | None = None
    ki: float | None = None
    max_step_us: float | None = None
    correction_ppm: float | None = None
    moved_us: float | None = None
    first_tenth_abs_mean_us: float | None = None
    last_tenth_abs_mean_us: float | None = None


class DiffStats(Doc):
    """|system time difference| (0x092C) of one slave, in ns."""

    min: float | None = None
    max: float | None = None
    mean: float | None = None
    p50: float | None = None
    p99: float | None = None


class DcSlave(Doc):
    """One slave behind the reference clock: its 0x092C, read every ``sample_every`` cycles."""

    slave: int | None = count()
    name: str | None = None
    samples: int | None = count()
    unanswered: int | None = count()
    abs_diff_ns: DiffStats | None = None


class DistributedClocks(Doc):
    """The run's distributed clocks, or only ``absent`` (why there are none)."""

    absent: str | None = opt()
    reference: DcReference | None = opt()
    sync0: Sync0 | None = opt()
    target_shift_us: float | None = opt()
    cycles: int | None = count(omit_none=True)
    phase: Phase | None = opt()
    phase_series: dict[str, Any] | None = opt()  # {every_cycles, mean_us: [...], abs_mean_us: [...]}
    dc_vs_host_ppm: float | None = opt()
    lock: PhaseLock | None = opt()
    sample_every: int | None = count(omit_none=True)
    probe: dict[str, Any] | None = opt()
    slaves: list[DcSlave] | None = opt()


class Board(Doc):
    """The board's own report (empty while the run goes). The virtual board has the two counts;
    the EtherCAT master adds its frames, bus health, drives and distributed clocks."""

    writes: int | None = count(omit_none=True)
    missed_updates: int | None = count(omit_none=True)
    lost_frames: int | None = count(omit_none=True)
    wkc_errors: int | None = count(omit_none=True)
    drive_not_enabled_cycles: int | None = count(omit_none=True)
    expected_wkc: int | None = count(omit_none=True)
    dc: bool | None = opt()
    al_reads: int | None = count(omit_none=True)
    receive_timeout_us: float | None = opt()
    bus_timeout_ms: float | None = opt()
    bus_timeout_frames: int | None = count(omit_none=True)  # frames sent in a row unanswered that lose the bus
    failure: str | None = opt()  # why the device failed the run (bus lost, a slave out of OP, a drive fault)
    frames: Frames | None = opt()
    host_gaps: HostGaps | None = opt()
    distributed_clocks: DistributedClocks | None = opt()  # (after host_gaps: the order the master writes)
    rtt_us: RoundTrip | None = opt()
    drives: list[Drive] | None = opt()
    slaves: list[Slave] | None = opt()
    warnings: list[str] | None = opt()  # what bring-up recovered from (e.g. a complete-access abort)
    emergencies: list[Emergency] | None = opt()
