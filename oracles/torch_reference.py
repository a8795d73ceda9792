"""Second reference: torch.softmax in float64 on the CPU.

Not correctly rounded (float64 arithmetic carries about 1e-16 relative error),
but independent of the mpmath oracle: the two must agree to within one ULP of
any format narrower than float64.  Computed on the CPU because many
accelerators (Ascend among them) lack float64.
"""

import torch


def softmax_float64(x: torch.Tensor, dim: int, *, log: bool = False) -> torch.Tensor:
    wide = x.detach().to("cpu", torch.float64)
    return torch.log_softmax(wide, dim) if log else torch.softmax(wide, dim)
