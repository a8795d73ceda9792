"""A full-domain Triton softmax: any rank, dim and strides, rows of any length, log and masked variants.

* :mod:`.triton_code`: the Triton kernels (one pass, chunked, split rows) and their helpers;
* :mod:`.cluster_code`: long rows over a thread-block cluster, in Gluon (Triton 3.9 on, sm_90 and sm_100);
* :mod:`.arithmetic`: how a call computes (float64, fp32 with the gap's error recovered, half);
* :mod:`.plan`, :mod:`.cuda_plan`, :mod:`.buffer_plan`: the launch plans, per device, with their constants;
* :mod:`.tuned_plans`: the launch settings tuned on a card, from its committed table (``tuned/``);
* :mod:`.layout`: the merging of the dims that index rows;
* :mod:`.launch_cache`: repeated calls launched without replanning;
* :mod:`.host`: the checks, the plan of a call, the launches, and the API below.

What it promises and how precisely it computes are its record's (``specs/full_softmax.py``).
"""

from .host import LIMITS, log_softmax, masked_softmax, softmax

__all__ = ["LIMITS", "log_softmax", "masked_softmax", "softmax"]
