import os
import subprocess
import sys

import numpy as np
import pytest

from softrt.errors import SoftRTError
from softrt.ipc import layout as L
from softrt.ipc.ring import Ring, remove_stale
from softrt.platform import get_platform


@pytest.fixture(autouse=True)
def own_state(state_dir):
    """Ring markers go to this test's state directory."""
    return state_dir


@pytest.fixture
def ring():
    r = Ring.create(capacity=8)
    yield r
    r.close()


def put(writer, seq):
    writer.put(seq, seq, seq * 10, seq * 10 + 1, seq * 10 + 2, seq * 10 + 3, 0, 0, 7, 3)


def test_segment_is_private_and_removed_on_close():
    r = Ring.create(capacity=8)
    path = f"/dev/shm/{r.name}"
    assert os.stat(path).st_mode & 0o777 == 0o600
    r.close()
    assert not os.path.exists(path)


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def _left_ring(state_dir, pid: int, identity: str, marked: bool = True) -> str:
    """A segment as a killed supervisor leaves it: in /dev/shm, and (*marked*) in this state's markers."""
    name = f"softrt-{pid}-0123abcd"
    get_platform().open_shared_memory(name, 4096, create=True).close()
    if marked:
        (state_dir / "rings").mkdir(parents=True, exist_ok=True, mode=0o700)
        (state_dir / "rings" / name).write_text(identity + "\n")
        (state_dir / "rings" / name).chmod(0o600)
    return name


def test_a_ring_is_marked_while_it_lives(state_dir):
    r = Ring.create(capacity=8)
    marker = state_dir / "rings" / r.name
    assert marker.read_text().strip() == get_platform().process_identity()
    assert remove_stale() == [] and os.path.exists(f"/dev/shm/{r.name}")  # its maker (this process) lives
    r.close()
    assert not marker.exists()


def test_the_ring_of_a_maker_gone_is_removed_and_named(state_dir):
    pid = _dead_pid()
    boot = get_platform().process_identity().split("/")[0]
    gone = _left_ring(state_dir, pid, f"{boot}/{pid}/1")
    others = _left_ring(state_dir, pid + 1 if pid < 4_000_000 else pid - 1, "x/1/1", marked=False)
    try:
        assert remove_stale() == [gone]
        assert not os.path.exists(f"/dev/shm/{gone}") and not (state_dir / "rings" / gone).exists()
        # Not marked in this state directory (another user's, another test's): left alone.
        assert os.path.exists(f"/dev/shm/{others}")
        assert remove_stale() == []
    finally:
        for name in (gone, others):
            get_platform().remove_shared_memory(name)


def test_a_reused_pid_is_not_the_rings_maker(state_dir):
    # The marker names this process's pid with another start time: the process that made it is gone.
    me = get_platform().process_identity()
    boot, pid, start = me.split("/")
    left = _left_ring(state_dir, int(pid), f"{boot}/{pid}/{int(start) + 1}")
    try:
        assert remove_stale() == [left]
    finally:
        get_platform().remove_shared_memory(left)


def test_a_marker_softrt_did_not_write_is_set_aside(state_dir):
    pid = _dead_pid()
    left = _left_ring(state_dir, pid, "x/1/1")
    marker = state_dir / "rings" / left
    marker.unlink()
    marker.symlink_to("/etc/hostname")
    try:
        assert remove_stale() == [] and os.path.exists(f"/dev/shm/{left}")
        assert not os.path.lexists(marker) and list((state_dir / "rings" / "failed").glob(f"{left}.*.reason"))
    finally:
        get_platform().remove_shared_memory(left)


def test_records_round_trip_across_a_second_mapping(ring):
    other = Ring.attach(ring.name)  # what the worker process does
    writer = other.writer()
    for seq in range(5):
        put(writer, seq)
    out = ring.reader().drain()
    assert out["seq"].tolist() == [0, 1, 2, 3, 4]
    assert out["done_ns"].tolist() == [3, 13, 23, 33, 43]
    assert out["rtt_ns"].tolist() == [7] * 5 and out["wkc"].tolist() == [3] * 5
    assert ring.reader().drain().size == 0
    del writer
    other.close()
    assert os.path.exists(f"/dev/shm/{ring.name}")  # only the creator removes it


def test_wrap_around_keeps_order(ring):
    writer, reader = ring.writer(), ring.reader()
    seen = []
    for seq in range(30):
        put(writer, seq)
        if seq % 5 == 4:
            seen.extend(reader.drain()["seq"].tolist())
    assert seen == list(range(30))
    assert reader.overflows == 0


def test_overflow_is_counted_never_blocking(ring):
    writer, reader = ring.writer(), ring.reader()
    for seq in range(13):  # capacity 8: five records are dropped, the writer never waits
        put(writer, seq)
    assert reader.overflows == 5
    out = reader.drain()
    assert out["seq"].tolist() == list(range(8))
    put(writer, 13)
    assert reader.drain()["seq"].tolist() == [13]


def test_capacity_must_be_a_power_of_two():
    with pytest.raises(SoftRTError):
        Ring.create(capacity=6)


def test_attach_rejects_a_foreign_segment(tmp_path):
    name = f"softrt-test-foreign-{os.getpid()}"
    with open(f"/dev/shm/{name}", "wb") as f:
        f.write(b"\0" * 4096)
    try:
        with pytest.raises(SoftRTError):
            Ring.attach(name)
    finally:
        os.unlink(f"/dev/shm/{name}")


def test_record_dtype_matches_the_slots():
    assert L.RECORD_DTYPE.itemsize == 80
    assert np.dtype(L.RECORD_DTYPE).names == L.RECORD_FIELDS


def test_segments_of_dead_creators_are_removed():
    import subprocess
    import sys

    code = "from softrt.ipc.ring import Ring; import os; r = Ring.create(8); print(r.name); os._exit(0)"
    name = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert os.path.exists(f"/dev/shm/{name}")  # left behind, as by a SIGKILLed supervisor
    live = Ring.create(capacity=8)  # creating a ring sweeps the dead one, not live ones
    try:
        assert not os.path.exists(f"/dev/shm/{name}")
        assert os.path.exists(f"/dev/shm/{live.name}")
    finally:
        live.close()
