"""A hostile kernel whose message is markup and terminal control: the reports and the terminal must show it as text.

* ``raises_markup``: raises on every input, inside its capabilities (it declares none), a message of HTML and
  Markdown (an image whose ``onerror`` runs a script, emphasis, a link, a code span, a table's pipe) and of terminal
  control (clear the screen, paint ``ALL PASSED`` red, a carriage return to overwrite the line, a bell, C1's CSI).
"""

import torch

MARKUP = "<img src=x onerror=alert(1)> | **bold** [link](http://x) `tick`"
CONTROL = "\x1b[2J\x1b[31mALL PASSED\x1b[0m\rOVERWRITE\x07\x9b31m"


def raises_markup(x: torch.Tensor, dim: int) -> torch.Tensor:
    raise ValueError(MARKUP + " " + CONTROL)
