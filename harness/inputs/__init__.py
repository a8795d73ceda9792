"""What is drawn: the recipes of inputs and their strategies, the seams of tiled rows, the regression catalog, the
inputs tests build themselves, and the coverage matrix that says which cells were drawn."""
