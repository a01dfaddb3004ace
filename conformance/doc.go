// Package conformance runs a chosen list of CPython's own Lib/test modules inside the sandbox and natively,
// compares the sandbox's outcomes with expectations.txt, and prints a per-module table. It has no library code:
// see TestConformance and README.md (make conformance, make conformance-update).
package conformance
