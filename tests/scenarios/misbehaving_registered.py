"""Scenario for tests/suite/test_hostile.py, loaded as a plugin (``-p tests.scenarios.misbehaving_registered``): two
misbehaving kernels registered, so that they run in the suite's own processes as registered kernels do
(``harness/guard/host.py`` hosts only kernels named by their path).  One ends its process inside a call, one is deaf to
the watchdog's alarm: a worker dies, or the watchdog's last resort ends it, and the run names the call.
"""

from specs.registry import USER_CONTRACT, KernelSpec, register
from tests.hostile.misbehaving import exits, hangs_deaf

for _function in (exits, hangs_deaf):
    register(KernelSpec(f"registered_{_function.__name__}", _function, USER_CONTRACT, clear_refusals=False,
                        by_default=False, replay_selector=f"tests.hostile.misbehaving:{_function.__name__}",
                        description=f"tests.hostile.misbehaving:{_function.__name__}, registered"))
