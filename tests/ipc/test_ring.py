import os

import numpy as np
import pytest

from softrt.errors import SoftRTError
from softrt.ipc import layout as L
from softrt.ipc.ring import Ring


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
