"""Scenario for tests/suite/test_scheduling.py: eight tests, each writing down which worker ran it, in order.

``CARDS_NAPS="5:0.4,2:0.2"`` makes cards 5 and 2 take that many seconds; ``CARDS_FIRST="7"`` marks card 7 ``first``;
``CARDS_WAITS="3:0.5"`` makes card 3 wait that long for another test's work (:func:`harness.plugins.scheduling.waited`)."""

import os
import time
from pathlib import Path

import pytest

from harness.plugins import scheduling

NAPS = dict(pair.split(":") for pair in os.environ.get("CARDS_NAPS", "").split(",") if pair)
FIRST = set(os.environ.get("CARDS_FIRST", "").split(","))
WAITS = dict(pair.split(":") for pair in os.environ.get("CARDS_WAITS", "").split(",") if pair)


@pytest.fixture
def shared_work(request):
    """Where a test waits for another's work: in its fixtures' setup, as tests/conftest.py's ``once``."""
    card = str(request.node.callspec.params["card"])
    if card in WAITS:
        time.sleep(float(WAITS[card]))
        scheduling.waited(request.node, float(WAITS[card]))


@pytest.mark.parametrize("card", [pytest.param(card, marks=[pytest.mark.first] if str(card) in FIRST else [])
                                  for card in range(8)])
def test_card(card, shared_work):
    time.sleep(float(NAPS.get(str(card), 0)))
    with open(Path(os.environ["CARDS_SEEN"]) / os.environ.get("PYTEST_XDIST_WORKER", "main"), "a") as hand:
        hand.write(f"{card}\n")
