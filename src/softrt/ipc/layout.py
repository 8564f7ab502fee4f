"""The per-cycle record and the ring header, as fixed int64 slots (pure; like ethercrab-wire).

A record is 10 int64 (80 bytes). Times are CLOCK_MONOTONIC nanoseconds.
"""

from __future__ import annotations

import numpy as np

# Record fields, in slot order. ``cycle`` is the board cycle (edge index) whose permit was seen;
# ``missed`` counts the board cycles that repeated the previous target before this write landed.
# ``rtt_ns`` and ``wkc`` are a frame's round trip and working counter (0 on the virtual board).
RECORD_FIELDS = ("seq", "cycle", "edge_ns", "detect_ns", "write_ns", "done_ns", "missed", "flags", "rtt_ns", "wkc")
RECORD_SLOTS = len(RECORD_FIELDS)
RECORD_DTYPE = np.dtype([(name, "<i8") for name in RECORD_FIELDS])

# Record flags (bit values), set by the device; a missed update is ``missed > 0``, not a flag.
FLAG_DEVICE_ERROR = 2  # the device reported an error for this cycle (e.g. EtherCAT working counter)
FLAG_DEVICE_FAILED = 4  # the device can no longer run (bus lost, drive fault): the loop stops after this cycle

# Header slots (int64). The worker writes WRITE_IDX after the record; the supervisor READ_IDX
# and STOP (a request to end the loop).
H_MAGIC, H_CAPACITY, H_WRITE_IDX, H_READ_IDX, H_OVERFLOWS, H_STOP = range(6)
HEADER_SLOTS = 16
MAGIC = 0x534F465452540001  # "SOFTRT" + layout version 1
