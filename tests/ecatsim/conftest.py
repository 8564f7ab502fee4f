"""The simulator's tests use the EtherCAT harness of ``tests/ethercat/conftest.py`` (the network
namespace, the ``softrt ecat-sim`` process and a pysoem master): loaded from there, not copied."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "softrt_tests_ecat_harness", Path(__file__).parents[1] / "ethercat" / "conftest.py"
)
_harness = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _harness  # (its dataclasses look their module up)
_spec.loader.exec_module(_harness)

patient_soem = _harness.patient_soem
ecat_ns = _harness.ecat_ns
start_sim = _harness.start_sim
soem_master = _harness.soem_master
