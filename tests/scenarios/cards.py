"""Scenario for tests/test_scheduling.py: eight tests, each writing down which worker ran it, in order."""

import os
from pathlib import Path

import pytest


@pytest.mark.parametrize("card", range(8))
def test_card(card):
    with open(Path(os.environ["CARDS_SEEN"]) / os.environ.get("PYTEST_XDIST_WORKER", "main"), "a") as hand:
        hand.write(f"{card}\n")
