"""The pytest plugins the root conftest loads: the run's settings, Hypothesis's profiles and seeds, the fixtures,
known findings, scheduling and shards under ``-n``, a soak round's time box and log, the records, the gate's verdict
and the failures told on one screen."""
