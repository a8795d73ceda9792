"""Softmax kernels under test: Triton code and the host code that checks and launches it.

What each kernel handles, promises and how precisely it computes is its
record's, in ``specs/`` (which registers them).  Importing a kernel decorates
its Triton functions, so TRITON_INTERPRET must be set before it is imported
when kernels are to run on the CPU.
"""
