"""Run one module of CPython's Lib/test with unittest and record every test's outcome.

Usage: runner.py [--libdir DIR] MODULE OUT

The same file runs natively and inside the sandbox. It writes one JSON object per line to OUT, flushed as each
test ends, so a run stopped by its deadline still leaves what it finished:
  {"id": TEST_ID, "status": "pass"|"skip"|"fail", "msg": ...}
  {"module": MODULE, "status": "needs-test-module"|"import-error"|"module-skip", "msg": ...}  (module not run)
  {"done": true, "seconds": S, "version": V}                                                 (last line)
Resources stay off as in regrtest without -u (no network, largefile, cpu, ...).
"""
import json
import sys
import time

# Modules that exist only in CPython builds made for its own tests (configure without --disable-test-modules).
# A test module that needs one at import is reported as "needs-test-module", never as a crash.
TEST_ONLY_MODULES = {
    "_testinternalcapi", "_testcapi", "_testlimitedcapi", "_testbuffer", "_testmultiphase",
    "_testsinglephase", "_testimportmultiple", "_testclinic", "_testclinic_limited", "_testexternalinspection",
    "_xxtestfuzz", "_ctypes_test", "xxsubtype", "xxlimited", "xxlimited_35",
}


def first_line(text, limit=300):
    text = " ".join(str(text).split())
    return text[:limit]


def main(argv):
    libdir = None
    if argv[:1] == ["--libdir"]:
        libdir, argv = argv[1], argv[2:]
    modname, out_path = argv
    if libdir:
        sys.path.insert(0, libdir)
    out = open(out_path, "w", encoding="utf-8")

    def emit(obj):
        out.write(json.dumps(obj, sort_keys=True) + "\n")
        out.flush()

    import importlib
    import unittest
    from test import support
    support.use_resources = []
    support.verbose = 0
    support.failfast = False

    t0 = time.monotonic()
    try:
        mod = importlib.import_module("test." + modname)
    except unittest.SkipTest as e:
        # test.support.import_helper.import_module turns a missing module into SkipTest("No module named 'x'").
        missing = str(e).partition("No module named ")[2].strip("'\"")
        status = "needs-test-module" if missing in TEST_ONLY_MODULES else "module-skip"
        emit({"module": modname, "status": status, "msg": first_line(e)})
        emit({"done": True, "seconds": round(time.monotonic() - t0, 2), "version": sys.version.split()[0]})
        return
    except ModuleNotFoundError as e:
        status = "needs-test-module" if e.name in TEST_ONLY_MODULES else "import-error"
        emit({"module": modname, "status": status, "msg": first_line("%s: %s" % (type(e).__name__, e))})
        emit({"done": True, "seconds": round(time.monotonic() - t0, 2), "version": sys.version.split()[0]})
        return
    except BaseException as e:  # noqa: BLE001 - any failure to import is the module's outcome
        emit({"module": modname, "status": "import-error", "msg": first_line("%s: %s" % (type(e).__name__, e))})
        emit({"done": True, "seconds": round(time.monotonic() - t0, 2), "version": sys.version.split()[0]})
        return

    suite = unittest.defaultTestLoader.loadTestsFromModule(mod)

    class Result(unittest.TestResult):
        """Reduces unittest's outcomes to pass/skip/fail per test id (a failed subtest fails its test)."""

        def __init__(self):
            super().__init__()
            self.cur = {}

        def _set(self, test, status, msg=""):
            tid = test.id()
            prev = self.cur.get(tid)
            if prev is None or prev[0] != "fail":
                self.cur[tid] = (status, msg)
            if not isinstance(test, unittest.TestCase):  # setUpClass/module fixtures: no stopTest follows
                self._flush(tid)

        def _flush(self, tid):
            st = self.cur.pop(tid, None)
            if st is not None:
                emit({"id": tid, "status": st[0], "msg": st[1]})

        def _err(self, err):
            etype, value, _ = err
            return first_line("%s: %s" % (etype.__name__, value))

        def stopTest(self, test):
            super().stopTest(test)
            self._flush(test.id())

        def addSuccess(self, test):
            if test.id() not in self.cur:
                self._set(test, "pass")

        def addExpectedFailure(self, test, err):
            self._set(test, "pass", "expected failure")

        def addUnexpectedSuccess(self, test):
            self._set(test, "fail", "unexpected success")

        def addSkip(self, test, reason):
            if isinstance(test, unittest.case._SubTest):
                return  # a skipped subtest does not decide its test's outcome
            self._set(test, "skip", first_line(reason))

        def addFailure(self, test, err):
            self._set(test, "fail", self._err(err))

        def addError(self, test, err):
            self._set(test, "fail", self._err(err))

        def addSubTest(self, test, subtest, err):
            if err is not None:
                self._set(test, "fail", self._err(err))
            elif test.id() not in self.cur:
                self.cur[test.id()] = ("pass", "")

    result = Result()
    suite.run(result)
    for tid in list(result.cur):
        result._flush(tid)
    emit({"done": True, "seconds": round(time.monotonic() - t0, 2), "version": sys.version.split()[0]})


if __name__ == "__main__":
    main(sys.argv[1:])
