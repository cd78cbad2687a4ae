"""Independent NumPy implementations of each formula, written plainly with loops (float64).

They are the ground truth that the JAX implementations are checked against in tests.
"""
