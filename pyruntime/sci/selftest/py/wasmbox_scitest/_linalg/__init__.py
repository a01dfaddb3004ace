"""Subpackage holding the builtin wasmbox_scitest._linalg._lalg."""
