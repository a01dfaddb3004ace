# expect: contained
# The classic jail break: find a class whose module has os/subprocess and use it. Inside wasm there is nothing to reach.
found = []
for cls in object.__subclasses__():
    try:
        g = cls.__init__.__globals__
    except AttributeError:
        continue
    for name in ("system", "fork", "execv", "spawnv"):
        mod = g.get("os") or g.get("sys")
        if mod is not None and hasattr(mod, name):
            found.append(name)
try:
    import os
    os.system("id") if hasattr(os, "system") else None
except Exception:
    pass
print("CONTAINED" if not found else "ESCAPED %r" % sorted(set(found)))
