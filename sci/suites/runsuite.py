# runsuite.py — runs pytest inside the sci sandbox on test paths of numpy's or pandas' own suites and prints one
# line "SUITE-RESULTS {json}" with every test's outcome. The workspace holds site/ (pytest and its imports) and
# t/ (the suites' test directories and conftest.py, laid out as in the packages). The packages themselves are
# the runtime's built-in ones: each of their subpackages gets its t/ directory appended to __path__, so that
# "numpy.linalg.tests.test_linalg" imports the test file while numpy.linalg stays the built-in module.
#
# Arguments (sys.argv[1:]): pytest's, the test paths relative to t/ ("numpy/linalg/tests"); the first component
# of each path names the package whose subpackages are extended.
import importlib
import json
import os
import sys

sys.path.insert(0, '/workspace/site')
root = '/workspace/t'
args = sys.argv[1:]
for top in sorted({a.split('/')[0] for a in args if not a.startswith('-')}):
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
        parts = os.path.relpath(dirpath, root).split(os.sep)
        if 'tests' in parts:  # the test packages themselves are found through their parents' __path__
            dirnames[:] = []
            continue
        try:
            m = importlib.import_module('.'.join(parts))
        except Exception:
            continue
        if hasattr(m, '__path__') and dirpath not in list(m.__path__):
            m.__path__.append(dirpath)

import pytest  # noqa: E402

results = []


class Recorder:
    def pytest_runtest_logreport(self, report):
        if report.when == 'call':
            msg = ''
            if report.failed:
                crash = getattr(report.longrepr, 'reprcrash', None)
                msg = crash.message if crash else str(report.longrepr)
            elif report.skipped and isinstance(report.longrepr, tuple):
                msg = str(report.longrepr[2])
            results.append((report.nodeid, 'failed' if report.failed else report.outcome, msg[:400]))
        elif report.failed:
            crash = getattr(report.longrepr, 'reprcrash', None)
            results.append((report.nodeid, 'error', (crash.message if crash else str(report.longrepr))[:400]))
        elif report.skipped:
            msg = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else ''
            results.append((report.nodeid, 'skipped', msg[:400]))

    def pytest_collectreport(self, report):
        if report.failed:
            results.append((report.nodeid, 'error', ('collection: ' + str(report.longrepr))[-400:]))


os.chdir(root)
# No fd-level capture (WASI has no dup), no faulthandler (no signals), no cache directory; pandas' own offline
# selection (no network, no databases).
code = pytest.main(['-p', 'no:cacheprovider', '-p', 'no:faulthandler', '--capture=sys', '-q', '--no-header',
                    '-W', 'ignore::DeprecationWarning', '--tb=no', '-o', 'addopts=', '--continue-on-collection-errors',
                    '-m', 'not network and not db'] + args,
                   plugins=[Recorder()])
print('SUITE-RESULTS ' + json.dumps({'exit': int(code), 'results': results}))
