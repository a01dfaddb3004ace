# wasmbox — common tasks. The interpreter is prebuilt in assets/; rebuilding it needs Debian's toolchain
# (pyruntime/build.sh installs it with apt-get) and 12 to 20 minutes on 2 cores.
GO ?= go

.PHONY: sci-suites test test-race interpreter interpreter-plain interpreter-profile verify-interpreter bench compare conformance conformance-update conformance-ci

test:
	$(GO) test ./...

test-race:
	$(GO) test -race ./...

# Rebuild assets/ from Debian's archive (every input pinned in pyruntime/versions.env and inputs.sha256).
interpreter:
	pyruntime/build.sh --out assets

# The "plain" build (no pymalloc/bulk-memory/ThinLTO/profile), only to measure what the flags buy. Not shipped.
interpreter-plain:
	pyruntime/build.sh --variant plain --out build/plain

# Remake pyruntime/pgo/cpython.proftext.xz, the profile the build optimises CPython with (a native training run
# of CPython's own PGO task; then rebuild with make interpreter).
interpreter-profile:
	pyruntime/pgo/train.sh

# Rebuild in a fresh folder and compare every checksum with assets/SHA256SUMS (reproducibility check).
verify-interpreter:
	pyruntime/verify.sh

bench:
	$(GO) test -run '^$$' -bench . -benchtime 20x ./bench/

compare:
	$(GO) run ./bench/compare

# CPython 3.13.5's own Lib/test modules (conformance/modules.txt) in the sandbox and natively: prints the
# per-module table and fails on any difference from conformance/expectations.txt. conformance-update rewrites the
# expectations from a full run (after an interpreter rebuild: run it, then review the diff).
conformance:
	conformance/run.sh full

conformance-update:
	conformance/run.sh full --update

conformance-ci:
	conformance/run.sh ci

# numpy's and pandas' own test suites in the sci runtime: every module of sci/suites/modules.txt, each failure
# checked against sci/suites/expectations.txt (CI runs the ci subset).
sci-suites:
	ws=$$(sci/suites/prepare.sh) && cd sci && $(GO) run ./internal/suites -ws "$$ws" -set full
