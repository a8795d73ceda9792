"""How much of the cards' memory a run holds: NVML's count of the memory in use on the run's GPUs, sampled while
the run goes.  NVML counts every process on a card (the workers', the kernel processes', anyone else's), and needs
no CUDA context of its own, so the run's first process, which runs no kernel, can sample it.  Where NVML is absent
(no NVIDIA driver, no ``nvidia-ml-py``), nothing is measured and nothing said."""

from __future__ import annotations

import os
import threading

INTERVAL = 0.5  # seconds between samples


class Sampler:
    """The most memory in use on the run's GPUs at once (summed over them), from :meth:`start` to :meth:`stop`."""

    def __init__(self) -> None:
        self.peak = 0  # bytes
        self.total = 0  # bytes, over the sampled GPUs
        self.cards: list[int] = []  # NVML's indices
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> bool:
        """Start sampling; False where NVML cannot be read."""
        try:
            import pynvml

            pynvml.nvmlInit()
            self.cards = visible_cards(pynvml.nvmlDeviceGetCount())
            handles = [pynvml.nvmlDeviceGetHandleByIndex(card) for card in self.cards]
            self.total = sum(pynvml.nvmlDeviceGetMemoryInfo(h).total for h in handles)
        except Exception:  # noqa: BLE001 (no module, no driver, no permission: not measured)
            return False

        def sample() -> None:
            while True:
                try:
                    used = sum(pynvml.nvmlDeviceGetMemoryInfo(h).used for h in handles)
                except Exception:  # noqa: BLE001 (the driver went away: the peak so far stands)
                    return
                self.peak = max(self.peak, used)
                if self._stop.wait(INTERVAL):
                    return

        self._thread = threading.Thread(target=sample, name="device-memory", daemon=True)
        self._thread.start()
        return True

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def said(self) -> str | None:
        """"at most X GiB of Y GiB in use on GPU 0 ..."; None where nothing was sampled."""
        if self._thread is None:
            return None
        cards = ", ".join(map(str, self.cards))
        return (f"at most {self.peak / 2**30:.1f} GiB of {self.total / 2**30:.1f} GiB in use on GPU {cards} while the "
                f"run went (NVML, every process on the card, sampled every {INTERVAL:g} s)")


def visible_cards(count: int, env=os.environ) -> list[int]:
    """NVML's indices of the GPUs ``CUDA_VISIBLE_DEVICES`` leaves the run (all where it is unset or names them
    otherwise than by index)."""
    listed = env.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return list(range(count))
    try:
        return [int(part) for part in listed.split(",") if part.strip() and 0 <= int(part) < count]
    except ValueError:
        return list(range(count))
