"""Import every module the interpreter ships, once; print one JSON report line.

Run inside the sandbox by pyruntime/cmd/importcheck (main.go) (the build's last step). Modules are the stdlib's .py files
and packages under sys._stdlib_dir plus the builtin modules. SKIP lists the modules that legitimately cannot be
imported under WASI, each with its reason; a module that fails and is not listed, or one that is listed and
imports, fails the check (so the list cannot go stale).
"""
import json
import os
import sys

SKIP = {
    "multiprocessing.popen_fork": "needs os.fork (no processes under WASI)",
    "multiprocessing.popen_forkserver": "needs os.fork and sockets",
    "multiprocessing.popen_spawn_posix": "needs os.fork / spawn (no processes under WASI)",
    "multiprocessing.popen_spawn_win32": "Windows only",
    "multiprocessing.synchronize": "needs _multiprocessing.SemLock (no semaphores under WASI)",
    "multiprocessing.forkserver": "needs sockets and os.fork",
    "multiprocessing.shared_memory": "needs _posixshmem (no shared memory under WASI)",
    "multiprocessing.sharedctypes": "needs ctypes (not built for WASI)",
    "multiprocessing.heap": "needs mmap of anonymous memory shared between processes",
    "multiprocessing.resource_tracker": "needs os.fork and signals",
    "asyncio.windows_events": "Windows only",
    "asyncio.windows_utils": "Windows only",
    "encodings.mbcs": "Windows only",
    "encodings.oem": "Windows only",
    "_pyrepl.windows_console": "Windows only",
    "ctypes": "needs _ctypes (libffi is not built for WASI)",
    "ctypes._aix": "needs ctypes",
    "ctypes._endian": "needs ctypes",
    "ctypes.util": "needs ctypes",
    "ctypes.wintypes": "needs ctypes",
    "dbm.gnu": "needs _gdbm (not built)",
    "dbm.ndbm": "needs _dbm (not built)",
    "_pyrepl.readline": "needs termios (no terminal under WASI)",
    "_pyrepl.unix_console": "needs termios (no terminal under WASI)",
    "_pyrepl.fancy_termios": "needs termios (no terminal under WASI)",
    "_pyrepl.unix_eventqueue": "needs termios (no terminal under WASI)",
    "_pyrepl.simple_interact": "needs termios (no terminal under WASI)",
    "_pyrepl._minimal_curses": "needs ctypes",
    "_pyrepl.curses": "needs _curses (not built)",
    "pty": "needs os.openpty / fork",
    "tty": "needs termios",
    "ssl": "needs _ssl (OpenSSL is not built for WASI)",
}


def shipped():
    root = sys._stdlib_dir or "/usr/local/lib/python3.13"
    names = set(sys.builtin_module_names)
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        dirnames[:] = sorted(d for d in dirnames if d not in ("__pycache__", "lib-dynload", "site-packages"))
        if rel == ".":
            pkg = ""
        else:
            if "__init__.py" not in filenames:
                dirnames[:] = []
                continue
            pkg = rel.replace(os.sep, ".")
            names.add(pkg)
        for f in filenames:
            if f.endswith(".py") and f != "__init__.py" and not f.startswith("_sysconfigdata"):
                names.add((pkg + "." if pkg else "") + f[:-3])
    # NAME.__main__ modules run a program (python -m NAME) when imported: they are not imported here.
    return sorted(n for n in names if n.isascii() and "-" not in n and not n.endswith(".__main__"))


def main():
    import io
    import importlib
    failed, stale, ok = {}, [], 0
    real_stdout = sys.stdout
    names = shipped()
    unknown = sorted(set(SKIP) - set(names))
    for name in names:
        sys.stdout = io.StringIO()  # some modules print on import (this)
        try:
            importlib.import_module(name)
            imported = True
            err = ""
        except BaseException as e:  # noqa: B902 - SystemExit or KeyboardInterrupt from an import is a failure too
            imported = False
            err = "%s: %s" % (type(e).__name__, e)
        finally:
            sys.stdout = real_stdout
        if imported:
            ok += 1
            if name in SKIP:
                stale.append(name)
        elif name not in SKIP:
            failed[name] = err[:300]
    # A skip entry for a module that is not shipped is stale too: the list names exactly what fails.
    stale += ["%s (not shipped)" % n for n in unknown]
    print(json.dumps({"imported": ok, "skipped": len(SKIP) - len(stale), "failed": failed, "stale_skips": stale},
                     sort_keys=True))


main()
