"""_wasmbox_boot: the fixed driver of every wasmbox run (installed by the host through wasmbox_prepare).

The host calls wasmbox_exec with a request (a dict in marshal's format, see docs/ABI.md); the C side calls
run(request_bytes) and returns its exit code.
Everything a snapshot of the initialised interpreter froze is reset here, per run: randomness, tempfile's name
sequence, os.environ, sys.argv, cwd, __main__. Exceptions are reported to the host as structured data and
printed to stderr the way CPython does.
"""
import sys
import os
import json
import marshal
import traceback
import linecache
import types
import atexit
import gc
import _io
import _wasmbox

_persist = {}  # session state: the __main__ namespace kept between execs of one Session


def _host(op, **fields):
    fields["op"] = op
    ok, resp = _wasmbox.call(json.dumps(fields, separators=(",", ":")).encode())
    return ok, resp


def _patch_asyncio(module):
    # WASI has no socketpair: the event loop's self-pipe is only needed to wake the loop from other threads or
    # signal handlers, neither of which exist here.
    cls = module.BaseSelectorEventLoop
    cls._make_self_pipe = lambda self: None
    cls._close_self_pipe = lambda self: None
    cls._write_to_self = lambda self: None
    cls._process_self_data = lambda self, data: None


# The one message of every network operation: a model reading the traceback must learn that the network is off
# on purpose, not that something is broken.
NETWORK_DISABLED = ("network access is disabled in this sandbox by design (no sockets, no DNS); "
                    "use the tools the host provides")


def _patch_socket(module):
    # WASI's _socket has no name resolution and cannot create sockets. Every client library (urllib, http.client,
    # smtplib, asyncio, third-party ones) goes through these functions, so they raise one clear OSError here.
    # Name lookups raise socket.gaierror (what clients catch for "cannot resolve"), socket() a PermissionError.
    def _no_dns(*args, **kwargs):
        raise module.gaierror(getattr(module, "EAI_FAIL", -4), NETWORK_DISABLED)

    import _socket
    for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr", "getnameinfo",
                 "getservbyname", "getservbyport", "getprotobyname"):
        if not hasattr(_socket, name):  # socket.getaddrinfo is a Python wrapper of the missing C one
            setattr(module, name, _no_dns)
    if not hasattr(_socket, "gethostname"):
        module.gethostname = lambda: "localhost"
    cls = module.socket
    orig_init = cls.__init__

    def __init__(self, family=-1, type=-1, proto=-1, fileno=None):
        if fileno is None:
            import errno
            raise PermissionError(errno.EACCES, NETWORK_DISABLED)
        orig_init(self, family, type, proto, fileno)

    cls.__init__ = __init__


# getpass.getuser() when the environment names no user (LOGNAME, USER, LNAME, USERNAME) and there is no password
# database: a fixed name instead of OSError.
DEFAULT_USER = "wasmbox"


def _patch_getpass(module):
    orig = module.getuser

    def getuser():
        try:
            return orig()
        except OSError:
            return DEFAULT_USER

    getuser.__doc__ = orig.__doc__
    module.getuser = getuser


_DEV_MODE_FLAG = 1 << 63
_DEV_MASK = (1 << 48) - 1
_UMASK = 0o022


def _patch_os_modes():
    # WASI preview 1 stat has no permission bits and there is no chmod. The host stores them (files 0o644 and
    # directories 0o755 unless changed) and passes them in st_dev's high bits; os.stat, lstat and fstat move
    # them to st_mode, and os.chmod, lchmod and fchmod change them through the host. os.mkdir and os.open
    # apply their mode argument as natively under a umask of 0o022 (builtins.open's files are 0o644). os.scandir
    # yields entries whose stat() carries the modes too (shutil.copytree copies them from there).
    import errno as _errno
    raw_stat, raw_lstat, raw_fstat = os.stat, os.lstat, os.fstat

    def fix(st):
        d = st.st_dev
        cls, (seq, extra) = st.__reduce__()
        if d & _DEV_MODE_FLAG:
            mode = (st.st_mode & ~0o7777) | ((d >> 48) & 0o777)
        elif st.st_mode & 0o7777:
            return st
        else:  # the read-only stdlib and packages: what a root-owned installation shows
            mode = st.st_mode | (0o755 if (st.st_mode & 0o170000) == 0o040000 else 0o644)
        return cls((mode, seq[1], d & _DEV_MASK) + tuple(seq[3:]), extra)

    def stat(path, *, dir_fd=None, follow_symlinks=True):
        return fix(raw_stat(path, dir_fd=dir_fd, follow_symlinks=follow_symlinks))

    def lstat(path, *, dir_fd=None):
        return fix(raw_lstat(path, dir_fd=dir_fd))

    def fstat(fd):
        return fix(raw_fstat(fd))

    def change(st, mode, name):
        if not isinstance(mode, int):
            raise TypeError("mode must be an integer, not %s" % type(mode).__name__)
        _, resp = _host("chmod", dev=st.st_dev & _DEV_MASK, ino=st.st_ino, mode=mode & 0o777)
        res = json.loads(resp)
        if res != "ok":
            code = _errno.ENOENT if res == "ENOENT" else _errno.EROFS
            raise OSError(code, os.strerror(code), name)

    def chmod(path, mode, *, dir_fd=None, follow_symlinks=True):
        change(raw_stat(path, dir_fd=dir_fd, follow_symlinks=follow_symlinks), mode, path)

    def lchmod(path, mode):
        change(raw_lstat(path), mode, path)

    def fchmod(fd, mode):
        change(raw_fstat(fd), mode, None)

    raw_mkdir, raw_open, raw_scandir = os.mkdir, os.open, os.scandir

    def apply_mode(st, m, name):
        # Only where the file system stores modes (the host marks st_dev): elsewhere (an engine that mounts the
        # workspace without them) the mode is ignored, as natively on a file system without permission bits.
        if st.st_dev & _DEV_MODE_FLAG:
            change(st, m, name)

    def mkdir(path, mode=0o777, *, dir_fd=None):
        raw_mkdir(path, mode, dir_fd=dir_fd)
        m = mode & 0o777 & ~_UMASK
        if m != 0o755:
            apply_mode(raw_stat(path, dir_fd=dir_fd), m, path)

    def open(path, flags, mode=0o777, *, dir_fd=None):
        m = mode & 0o777 & ~_UMASK
        if not flags & os.O_CREAT or m == 0o644:
            return raw_open(path, flags, mode, dir_fd=dir_fd)
        created = bool(flags & os.O_EXCL)
        if not created:
            try:
                raw_stat(path, dir_fd=dir_fd)
            except FileNotFoundError:
                created = True
            except OSError:
                pass
        fd = raw_open(path, flags, mode, dir_fd=dir_fd)
        if created:
            try:
                apply_mode(raw_fstat(fd), m, path)
            except BaseException:
                os.close(fd)
                raise
        return fd

    class DirEntry:
        __slots__ = ("_entry", "name", "path")

        def __init__(self, entry):
            self._entry = entry
            self.name = entry.name
            self.path = entry.path

        def inode(self):
            return self._entry.inode()

        def is_dir(self, *, follow_symlinks=True):
            return self._entry.is_dir(follow_symlinks=follow_symlinks)

        def is_file(self, *, follow_symlinks=True):
            return self._entry.is_file(follow_symlinks=follow_symlinks)

        def is_symlink(self):
            return self._entry.is_symlink()

        def is_junction(self):
            return False

        def stat(self, *, follow_symlinks=True):
            return fix(self._entry.stat(follow_symlinks=follow_symlinks))

        def __fspath__(self):
            return self.path

        def __repr__(self):
            return "<DirEntry %r>" % (self.name,)

        def __reduce_ex__(self, protocol):
            raise TypeError("cannot pickle 'posix.DirEntry' object")

        __class_getitem__ = classmethod(types.GenericAlias)

    class ScandirIterator:
        __slots__ = ("_it",)

        def __init__(self, it):
            self._it = it

        def __iter__(self):
            return self

        def __next__(self):
            return DirEntry(next(self._it))

        def close(self):
            self._it.close()

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._it.close()

        def __reduce_ex__(self, protocol):
            raise TypeError("cannot pickle 'posix.ScandirIterator' object")

    def scandir(path="."):
        return ScandirIterator(raw_scandir(path))

    DirEntry.__module__ = ScandirIterator.__module__ = "os"
    for f, raw in ((stat, raw_stat), (lstat, raw_lstat), (fstat, raw_fstat), (chmod, os.chmod),
                   (mkdir, raw_mkdir), (open, raw_open), (scandir, raw_scandir)):
        f.__doc__ = raw.__doc__
    fchmod.__doc__ = "Change the access permissions of the file given by file descriptor fd."
    lchmod.__doc__ = "Change the access permissions of a file, without following symbolic links."
    for f in (stat, lstat, fstat, chmod, lchmod, fchmod, mkdir, open, scandir):
        f.__module__ = "os"
        f.__qualname__ = f.__name__
    sets = (os.supports_fd, os.supports_dir_fd, os.supports_follow_symlinks, os.supports_effective_ids)
    for old, new in ((raw_stat, stat), (raw_lstat, lstat), (raw_fstat, fstat), (os.chmod, chmod),
                     (raw_mkdir, mkdir), (raw_open, open), (raw_scandir, scandir)):
        for s in sets:
            if old in s:
                s.discard(old)
                s.add(new)
    os.supports_fd.add(chmod)
    os.stat, os.lstat, os.fstat, os.chmod, os.lchmod, os.fchmod = stat, lstat, fstat, chmod, lchmod, fchmod
    os.mkdir, os.open, os.scandir, os.DirEntry = mkdir, open, scandir, DirEntry


class _PatchFinder:
    """Patches modules right after they are imported for the first time (asyncio.selector_events, socket,
    getpass)."""

    targets = {"asyncio.selector_events": _patch_asyncio, "socket": _patch_socket, "getpass": _patch_getpass}

    def find_spec(self, name, path=None, target=None):
        hook = self.targets.get(name)
        if hook is None:
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find else None
            if spec is not None:
                loader = spec.loader
                orig = loader.exec_module

                def exec_module(module, _orig=orig, _hook=hook):
                    _orig(module)
                    _hook(module)

                loader.exec_module = exec_module
                return spec
        return None


def _install_builtins():
    # What site.py adds to builtins (site does not run here): help, exit, quit, copyright, credits, license.
    # exit() and quit() do not close sys.stdin as site's do: a Session's later runs keep their stdin.
    import builtins
    import _sitebuiltins

    class Quitter(_sitebuiltins.Quitter):
        def __call__(self, code=None):
            raise SystemExit(code)

    builtins.exit = Quitter("exit", "Ctrl-D (i.e. EOF)")
    builtins.quit = Quitter("quit", "Ctrl-D (i.e. EOF)")
    builtins.help = _sitebuiltins._Helper()
    builtins.copyright = _sitebuiltins._Printer("copyright", sys.copyright)
    builtins.credits = _sitebuiltins._Printer("credits", "Thanks to CWI, CNRI, BeOpen, Zope Corporation, the Python "
                                              "Software Foundation,\nand a cast of thousands for supporting Python "
                                              "development.  See www.python.org for more information.")
    builtins.license = _sitebuiltins._Printer("license", "See https://www.python.org/psf/license/")


def install():
    _patch_os_modes()
    sys.meta_path.insert(0, _PatchFinder())
    for name, patch in _PatchFinder.targets.items():
        if name in sys.modules:
            patch(sys.modules[name])
    _install_builtins()
    import signal
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir("/workspace")
    # What every run starts with unless its request says otherwise, set here so that the snapshot holds it and
    # a fresh run usually has nothing to change (_reset).
    _line_buffered()
    os.environ.clear()
    os.environ.update(_environ({}))
    _persist["environ"] = _environ({})


def _line_buffered():
    # Line-buffered stdio: every line reaches the host (and its streaming writers) as it is printed, and a run
    # killed at its deadline keeps every complete line it printed.
    for s in (sys.stdout, sys.stderr):
        try:
            if not s.line_buffering:
                s.reconfigure(line_buffering=True)
        except Exception:
            pass


def _environ(env):
    want = dict(env)
    want.setdefault("TMPDIR", "/tmp")
    want.setdefault("HOME", "/workspace")
    return want


def _reset(req):
    _line_buffered()
    # A fresh run starts from the snapshot, where os.environ and the C environment both hold what install set
    # (_persist["environ"]): when that is this run's environment there is nothing to change. Comparing with the
    # plain dict costs a microsecond, os.environ (which decodes every entry) twenty. A Session's exec always sets
    # every variable again, because an earlier exec may have changed one, or its C value (os.putenv).
    want = _environ(req.get("env") or {})
    if req.get("session") or want != _persist.get("environ"):
        os.environ.clear()
        os.environ.update(want)
    # Local time follows TZ (libc re-reads it); time's constants (timezone, tzname...) follow it too, recomputed
    # only when this run's TZ differs from the last one's. os.environ now holds want.
    tz = want.get("TZ")
    if tz != _persist.get("tz"):
        _persist["tz"] = tz
        time = sys.modules.get("time")
        if time is not None and hasattr(time, "tzset"):
            time.tzset()
    sys.argv = list(req.get("argv") or [""])
    os.chdir(req.get("cwd") or "/workspace")
    seed = req.get("seed")
    random = sys.modules.get("random")
    if random is not None:
        random.seed(seed if seed is not None else None)
    if req.get("invalidate_caches"):
        import importlib
        importlib.invalidate_caches()
    tempfile = sys.modules.get("tempfile")
    if tempfile is not None:
        tempfile._name_sequence = None
        tempfile.tempdir = None


def _main_module(req):
    if req.get("session"):
        ns = _persist.get("main")
        if ns is None:
            ns = types.ModuleType("__main__")
            _persist["main"] = ns
    else:
        ns = types.ModuleType("__main__")
    ns.__dict__.setdefault("__builtins__", __builtins__)
    sys.modules["__main__"] = ns
    for name, src in (req.get("modules") or {}).items():
        mod = types.ModuleType(name)
        mod.__file__ = "<wasmbox:%s>" % name
        exec(compile(src, mod.__file__, "exec"), mod.__dict__)
        sys.modules[name] = mod
    return ns


# The report's text is cut here so that it always fits a host request; the host cuts it again to its own bounds.
_MAX_MESSAGE = 64 << 10
_MAX_TRACEBACK = 256 << 10


def _cut(s, n):
    if len(s) <= n:
        return s
    return s[:n] + "\n[wasmbox: truncated: %d more characters]" % (len(s) - n)


def _exc_report(exc, filename):
    # Drop the driver's own frames: the traceback starts at the program, as with `python file.py`.
    t = exc.__traceback__
    while t is not None and t.tb_frame.f_code.co_filename == "<wasmbox_boot>":
        t = t.tb_next
    exc = exc.with_traceback(t)
    try:
        tb = "".join(traceback.format_exception(exc))
    except BaseException:
        tb = ""
    line = 0
    t = exc.__traceback__
    while t is not None:
        if t.tb_frame.f_code.co_filename == filename:
            line = t.tb_lineno
        t = t.tb_next
    if isinstance(exc, SyntaxError) and exc.filename == filename and type(exc.lineno) is int and exc.lineno > 0:
        line = exc.lineno
    try:
        msg = str(exc)
        if type(msg) is not str:
            msg = "<exception str() failed>"
    except BaseException:
        msg = "<exception str() failed>"
    return {"type": type(exc).__name__, "message": _cut(msg, _MAX_MESSAGE), "traceback": _cut(tb, _MAX_TRACEBACK),
            "line": line if type(line) is int else 0}


def _flush():
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except Exception:
            pass


def _print_exception(report, exc):
    # What CPython does with an uncaught exception: sys.excepthook, and when the hook itself fails, both
    # tracebacks. The host's report (Result.Exception) is the same either way.
    hook = getattr(sys, "excepthook", None)
    if hook is None or hook is sys.__excepthook__:
        try:
            sys.stderr.write(report["traceback"])
        except BaseException:
            pass
        return
    try:
        hook(type(exc), exc, exc.__traceback__)
    except BaseException as err:
        try:
            sys.stderr.write("Error in sys.excepthook:\n")
            t = err.__traceback__
            while t is not None and t.tb_frame.f_code.co_filename == "<wasmbox_boot>":
                t = t.tb_next
            sys.stderr.write("".join(traceback.format_exception(type(err), err, t, chain=False)))
            sys.stderr.write("\nOriginal exception was:\n")
            sys.stderr.write(report["traceback"])
        except BaseException:
            pass


def _std_streams():
    keep = set()
    for name in ("stdin", "stdout", "stderr", "__stdin__", "__stdout__", "__stderr__"):
        s = getattr(sys, name, None)
        while s is not None and id(s) not in keep:
            keep.add(id(s))
            s = getattr(s, "buffer", None) or getattr(s, "raw", None)
    return keep


def _open_files():
    # The file objects this run made that are still open, outermost layers first (a text wrapper before its
    # buffer before its raw file), so that closing one flushes what the next one holds. The snapshot's objects
    # are frozen (gc.freeze), so this walks only the objects the run itself created.
    keep = None
    layers = ([], [], [])
    for o in gc.get_objects():
        # _io's concrete base classes: isinstance against io.IOBase (an ABC) costs a microsecond per object.
        if isinstance(o, _io._IOBase):
            if keep is None:
                keep = _std_streams()
            if id(o) in keep:
                continue
            try:
                if o.closed:
                    continue
            except BaseException:
                continue
            if isinstance(o, _io._TextIOBase):
                layers[0].append(o)
            elif isinstance(o, _io._BufferedIOBase):
                layers[1].append(o)
            else:
                layers[2].append(o)
    return layers[0] + layers[1] + layers[2]


def _flush_files():
    # A Session's exec ends: what the program wrote reaches the workspace, and its files stay open.
    for f in _open_files():
        try:
            if f.writable():
                f.flush()
        except BaseException:
            pass


def _finalize(ns):
    # What CPython's shutdown does for a program, in its order: atexit callbacks (logging registers its
    # shutdown there), the standard streams flushed, the __main__ module's globals released (their finalizers
    # run), every file object still open flushed and closed, and a collection for cycles. The host's deadline
    # and limits still hold: a callback that never returns is stopped like any other code. The modules it uses
    # are imported once, in the snapshot: an import here would cost every fresh run more than the rest of it.
    try:
        atexit._run_exitfuncs()
    except BaseException:
        pass
    _flush()
    if ns is not None:
        try:
            ns.__dict__.clear()
        except BaseException:
            pass
    # Files first, then the collection: a file in an unreachable cycle is still found and closed outermost
    # first (the collector would finalize its layers in any order, and a raw file closed before its buffer loses
    # the buffer, as it does natively). Finalizers the collection runs may open files again.
    _close_files()
    # The snapshot's objects are frozen, so what the run made is in the young generation until a collection
    # moves it on: while none has, collecting that generation finds every cycle the run left, and costs less
    # than a full collection (which also empties the interpreter's free lists, memory the next run restores).
    # A collection that found nothing ran no finalizer, so unless the program registered gc.callbacks (which a
    # collection calls) no file can have been opened since the last look.
    try:
        young = gc.get_count()
        found = gc.collect(0 if young[1] == 0 and young[2] == 0 else 2)
    except BaseException:
        found = 1
    if found or gc.callbacks:
        _close_files()
    _flush()


def _close_files():
    for f in _open_files():
        try:
            f.close()
        except BaseException:
            pass


def run(raw):
    req = marshal.loads(raw)
    if req.get("shutdown"):
        # A Session is closing: the end of its program.
        _finalize(_persist.pop("main", None))
        return 0
    filename = req.get("filename") or "<string>"
    code_text = req.get("code", "")
    session = bool(req.get("session"))
    _reset(req)
    ns = _main_module(req)
    ns.__dict__["__file__"] = filename
    exit_code = 0
    try:
        try:
            code = compile(code_text, filename, "exec", dont_inherit=True)
            exec(code, ns.__dict__)
        finally:
            _flush()
    except SystemExit as e:
        c = e.code
        if c is None:
            exit_code = 0
        elif isinstance(c, int):
            exit_code = c & 0xFF if c >= 0 else 1
        else:
            print(c, file=sys.stderr)
            exit_code = 1
    except BaseException as e:  # noqa: B902 - everything the program raised ends the run
        exit_code = 1
        try:
            report = _exc_report(e, filename)
        except BaseException:
            report = {"type": type(e).__name__, "message": "<the exception could not be formatted>",
                      "traceback": "", "line": 0}
        try:
            _host("exception", **report)
        except BaseException:
            pass
        _print_exception(report, e)
    if session:
        _flush()
        _flush_files()
    else:
        _finalize(ns)
    return exit_code
