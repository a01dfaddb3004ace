"""Subpackage holding the builtin wasmbox_scitest._core._native."""
