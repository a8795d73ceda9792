"""Scenario for tests/suite/test_report.py (its file name keeps the main run from collecting it).

Under ``pytest -n 2`` the middle test kills its worker process; the other two
record their accuracy as usual.  The report must miss exactly one record.
"""

import os

import torch

from harness.inputs.strategies import matrix
from harness.judging.judge import judge_softmax
from harness.judging.recording import make_record
from oracles.call import Call
from specs import torch_softmax
from specs.operations import SOFTMAX


def record_one(backend, accuracy_record, seed: int) -> None:
    case = matrix(4, 33, seed=seed)
    x, _ = case.make(backend.device)
    verdict = judge_softmax(torch_softmax.SPEC, Call(x, 1, SOFTMAX, backend.name), torch.softmax(x, 1), replay=repr(case))
    accuracy_record(make_record("torch", backend, case, verdict))


def test_records_before(backend, accuracy_record):
    record_one(backend, accuracy_record, seed=1)


def test_worker_dies(backend, accuracy_record):
    os._exit(3)


def test_records_after(backend, accuracy_record):
    record_one(backend, accuracy_record, seed=2)
