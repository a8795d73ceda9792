"""matplotlib, for the figures a report writes: to files only, and imported on first use.

Importing pyplot costs about a second, in every process that imports the
report (each xdist worker, each sub-run of the suite's own tests); most never
draw a figure.
"""


def pyplot():
    """matplotlib.pyplot, with the file-only backend."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot

    return matplotlib.pyplot
