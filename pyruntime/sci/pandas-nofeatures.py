"""pandas-nofeatures.py PKGDIR: make pandas' top-level imports of modules the sandbox does not have lazy or
optional (no dlopen and FFI: ctypes; no mmap in WASI preview 1). Each rewrite must match exactly once."""
import pathlib
import sys

root = pathlib.Path(sys.argv[1])
edits = {
    "pandas/errors/__init__.py": [
        ("import ctypes\n", ""),
        ("({ctypes.WinError()})", "({__import__('ctypes').WinError()})"),
    ],
    "pandas/core/interchange/from_dataframe.py": [
        ("\nimport ctypes\n", "\nclass _LazyCtypes:  # ctypes is needed only when a buffer is read, never at import\n"
         "    def __getattr__(self, name):\n        import ctypes\n        return getattr(ctypes, name)\n\n\nctypes = _LazyCtypes()\n"),
    ],
    "pandas/io/excel/_openpyxl.py": [
        ("\nimport mmap\n", "\ntry:\n    import mmap\nexcept ImportError:  # WASI has no mmap\n    mmap = None\n"),
        ("not isinstance(self._handles.handle, mmap.mmap)", "not (mmap and isinstance(self._handles.handle, mmap.mmap))"),
    ],
    "pandas/io/common.py": [
        ("\nimport mmap\n", "\ntry:\n    import mmap\nexcept ImportError:  # WASI has no mmap: memory_map=True is refused below\n    mmap = None\n"),
        ("(str, bytes, mmap.mmap)", "(str, bytes) + ((mmap.mmap,) if mmap else ())"),
    ],
}
for rel, pairs in edits.items():
    p = root / rel
    text = p.read_text()
    for old, new in pairs:
        if text.count(old) != 1:
            sys.exit(f"pandas-nofeatures: {rel}: {old!r} found {text.count(old)} times, want 1")
        text = text.replace(old, new)
    p.write_text(text)
