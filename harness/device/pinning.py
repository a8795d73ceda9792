"""One device per xdist worker, on CUDA GPUs and on Ascend NPUs.

Worker ``gwK`` takes device K mod D of the D devices the user made visible.

* With a visible-device list in the environment (``CUDA_VISIBLE_DEVICES``,
  ``ASCEND_RT_VISIBLE_DEVICES``) the worker indexes into that list, never
  renumbering from 0, and narrows the variable to its own entry before the
  device runtime starts; inside the worker that device is then device 0.
* Without a list the worker asks the runtime how many devices there are and
  selects its own with ``set_device`` (the runtime has started by then, so the
  environment can no longer narrow it).

This is the convention of triton-ascend's CI, which pins each worker to NPU
``int(worker_id[2:]) % torch.npu.device_count()``.

The CPU threads a run may use (:func:`cpu_threads`) are shared the same way:
among a run's workers (:func:`harness.plugins.session.thread_share`), and among a soak's
rounds at once (:mod:`harness.soak`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass

VISIBLE_DEVICES = {"cuda": "CUDA_VISIBLE_DEVICES", "npu": "ASCEND_RT_VISIBLE_DEVICES"}


def cpu_threads(env: MutableMapping[str, str]) -> int:
    """The CPU threads a run may use: ``OMP_NUM_THREADS`` where set (OpenMP also takes a list per nesting level: its
    first), else every core."""
    try:
        return int(env.get("OMP_NUM_THREADS", "").split(",")[0])
    except ValueError:
        return os.cpu_count() or 1


def worker_number(worker_id: str | None) -> int | None:
    """12 for "gw12"; None outside xdist."""
    if not worker_id or not worker_id.startswith("gw"):
        return None
    return int(worker_id[2:])


def visible_list(backend: str, env: MutableMapping[str, str]) -> list[str] | None:
    """The user's visible devices for ``backend``, or None when the variable is unset."""
    value = env.get(VISIBLE_DEVICES.get(backend, ""), None)
    if value is None or not value.strip():
        return None
    return [entry.strip() for entry in value.split(",") if entry.strip()]


def torch_npu_reads(value: str) -> list[int]:
    """The devices torch_npu takes from ``ASCEND_RT_VISIBLE_DEVICES=value`` (``torch_npu/npu/__init__.py``,
    ``_parse_visible_devices``): the characters up to the first that is neither a digit nor a comma, split at the
    commas up to the first empty entry."""
    kept = value
    for position, character in enumerate(value):
        if not (character.isdigit() or character == ","):
            kept = value[:position]
            break
    devices = []
    for entry in kept.split(","):
        if not entry:
            break
        devices.append(int(entry))
    return devices


def npu_list_problem(env: MutableMapping[str, str]) -> str | None:
    """Why torch_npu would see fewer NPUs than ``ASCEND_RT_VISIBLE_DEVICES`` names, if it would: it reads the list
    only up to its first character that is neither a digit nor a comma, and sees no NPU at all where the list is not
    ascending (``_device_count_ascend_hal``: "rts need ascending order")."""
    value = env.get(VISIBLE_DEVICES["npu"])
    if value is None or not value.strip():
        return None
    named = visible_list("npu", env) or []
    read = torch_npu_reads(value)
    if any(later <= earlier for earlier, later in zip(read, read[1:])):
        return (f"ASCEND_RT_VISIBLE_DEVICES={value!r} is not in ascending order, and torch_npu then sees no NPU at "
                f"all (its runtime needs the list ascending): write it {','.join(map(str, sorted(set(read))))}")
    if [str(device) for device in read] != named:
        return (f"ASCEND_RT_VISIBLE_DEVICES={value!r}: torch_npu reads a list only up to its first character that is "
                f"neither a digit nor a comma, so it sees {read or 'no NPU'} of the {named} named: write it "
                f"{','.join(named)}")
    return None


@dataclass(frozen=True)
class Pin:
    backend: str
    device: str  # as the user numbers it
    narrowed: bool  # True: the environment names this one device; False: set_device(index)
    index: int = 0  # the device's index inside the worker


def narrow(worker_id: str | None, env: MutableMapping[str, str] = os.environ) -> list[Pin]:
    """Before any device runtime starts: narrow every visible-device list to this worker's entry."""
    number = worker_number(worker_id)
    pins = []
    if number is None:
        return pins
    for backend, variable in VISIBLE_DEVICES.items():
        devices = visible_list(backend, env)
        if devices:
            chosen = devices[number % len(devices)]
            env[variable] = chosen
            pins.append(Pin(backend, chosen, narrowed=True))
    return pins


def select(backend: str, worker_id: str | None, count: Callable[[], int], set_device: Callable[[int], None],
           narrowed: list[Pin]) -> Pin | None:
    """After the runtime started: a worker whose list was not narrowed picks its device by number."""
    number = worker_number(worker_id)
    if number is None or backend not in VISIBLE_DEVICES:
        return None
    already = [pin for pin in narrowed if pin.backend == backend]
    if already:
        return already[0]
    index = number % max(count(), 1)
    set_device(index)
    return Pin(backend, str(index), narrowed=False, index=index)


def workers(devices: int, per_device: int | None, cpus: int) -> int:
    """Workers for ``-n auto`` on a device backend: ``per_device`` each, by default the cores shared out."""
    per_device = per_device or max(1, cpus // max(devices, 1))
    return max(1, devices) * per_device
