# wasmbox — common tasks. The interpreter is prebuilt in assets/; rebuilding it needs Debian's toolchain
# (pyruntime/build.sh installs it with apt-get) and about 10 minutes on 2 cores.
GO ?= go

.PHONY: test test-race interpreter interpreter-plain verify-interpreter bench compare

test:
	$(GO) test ./...

test-race:
	$(GO) test -race ./...

# Rebuild assets/ from Debian's archive (every input pinned in pyruntime/versions.env and inputs.sha256).
interpreter:
	pyruntime/build.sh --out assets

# The "plain" build (no pymalloc/bulk-memory/ThinLTO), only to measure what the flags buy. Not shipped.
interpreter-plain:
	pyruntime/build.sh --variant plain --out build/plain

# Rebuild in a fresh folder and compare every checksum with assets/SHA256SUMS (reproducibility check).
verify-interpreter:
	pyruntime/verify.sh

bench:
	$(GO) test -run '^$$' -bench . -benchtime 20x ./bench/

compare:
	$(GO) run ./bench/compare
