#!/usr/bin/env bash
# CI: the subset of CPython's Lib/test marked "ci" in conformance/modules.txt, in the sandbox, against
# conformance/expectations.txt (a few minutes). Fetches the pinned CPython tarball with pyruntime/fetch.sh (apt's
# Debian archive keyring; no other tools). The full run with the native comparison is `make conformance`.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "--- conformance: the CI subset of CPython's Lib/test in the sandbox (conformance/modules.txt)"
exec conformance/run.sh ci
