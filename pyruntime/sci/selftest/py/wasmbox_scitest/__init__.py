"""Probe package of the sci build: Python files in the stdlib zip, C/C++ modules linked in as builtins."""
from ._core._native import median, spin
from ._linalg._lalg import dot

__all__ = ["dot", "median", "spin"]
