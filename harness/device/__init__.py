"""Where kernels run: the backend (``--device``), one device per xdist worker, and the interpreter's view of a
kernel's sums (a tiled kernel that declares one tile, warned)."""
