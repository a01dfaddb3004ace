package hostfuncs_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
)

// TestCallArgsKeptAtTheirCap: a call's arguments of exactly MaxCallArgsBytes are kept; one byte more and the
// record keeps only their size and hash (mutation testing moved the cap by one and no test noticed).
func TestCallArgsKeptAtTheirCap(t *testing.T) {
	b := hostfuncs.NewBridge(hostfuncs.NewRegistry(), gateRun(t, governance.Limits{}), governance.SourcePython)
	at := json.RawMessage(`"` + strings.Repeat("x", hostfuncs.MaxCallArgsBytes-2) + `"`)
	past := json.RawMessage(`"` + strings.Repeat("x", hostfuncs.MaxCallArgsBytes-1) + `"`)
	b.Call(context.Background(), "not_a_tool", at)
	b.Call(context.Background(), "not_a_tool", past)
	calls := b.Calls()
	if len(calls) != 2 {
		t.Fatalf("%d records", len(calls))
	}
	if len(calls[0].Args) != hostfuncs.MaxCallArgsBytes || calls[0].ArgsSize != 0 {
		t.Errorf("arguments of exactly MaxCallArgsBytes: kept %d bytes, size %d", len(calls[0].Args), calls[0].ArgsSize)
	}
	if calls[1].Args != nil || calls[1].ArgsSize != hostfuncs.MaxCallArgsBytes+1 || len(calls[1].ArgsSHA256) != 64 {
		t.Errorf("arguments one byte past: kept %d bytes, size %d, hash %q", len(calls[1].Args), calls[1].ArgsSize, calls[1].ArgsSHA256)
	}
}
