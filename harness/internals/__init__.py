"""What of torch, Triton, Hypothesis, pytest-xdist and the CPU the suite relies on or changes, each behind one module.

A new version of a library that moves an internal breaks one module here (its test in tests/suite/ says which).
"""
