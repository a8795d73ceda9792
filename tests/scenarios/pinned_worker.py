"""Scenario for tests/suite/test_devices.py, run on fake devices (``-p tests.fakes.devices``).

Each xdist worker writes which device it was given, as the machine numbers
devices, and the visible-device list its runtime started with.
"""

import json
import os
from pathlib import Path

from tests.fakes.devices import RUNTIMES, VISIBLE


def test_write_this_workers_device(backend):
    runtime = RUNTIMES[backend.name]
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    view = {
        "backend": backend.name,
        "device": str(backend.device),
        "physical": runtime.physical_id(),
        "index": backend.device.index,
        "started_with": runtime.started_with,
        "visible_now": os.environ.get(VISIBLE[backend.name]),
    }
    (Path(os.environ["FAKE_DEVICES_LOG"]) / f"{worker}.json").write_text(json.dumps(view))
