"""Scenario for tests/suite/test_scheduling.py: each process that runs a test writes down its CPU threads."""

import os
from pathlib import Path

import torch


def test_write_down_the_threads():
    name = os.environ.get("PYTEST_XDIST_WORKER", "main")
    (Path(os.environ["THREADS_SEEN"]) / name).write_text(f"{torch.get_num_threads()} {os.environ['OMP_NUM_THREADS']}")
