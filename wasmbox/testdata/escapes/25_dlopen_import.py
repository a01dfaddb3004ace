# expect: contained
import importlib.machinery
try:
    spec = importlib.machinery.ExtensionFileLoader("evil", "/lib/x86_64-linux-gnu/libc.so.6")
    spec.create_module(importlib.machinery.ModuleSpec("evil", spec))
    print("ESCAPED")
except Exception:
    print("CONTAINED")
