package wasmbox

import (
	"context"
	"strings"
	"testing"
)

type recordCloser struct {
	name string
	log  *[]string
}

func (r recordCloser) Close(context.Context) error { *r.log = append(*r.log, r.name); return nil }

// TestClosersLiveAsLongAsTheSandbox: Close closes Config.Closers once, in reverse order; a New that fails closes
// them too (the Sandbox would have owned them).
func TestClosersLiveAsLongAsTheSandbox(t *testing.T) {
	ctx := context.Background()
	var log []string
	sb, err := New(ctx, Config{Closers: []Closer{recordCloser{"a", &log}, recordCloser{"b", &log}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 0 {
		t.Fatalf("closed before Close: %v", log)
	}
	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	sb.Close(ctx)
	if strings.Join(log, ",") != "b,a" {
		t.Fatalf("closed %v, want b,a once", log)
	}
	log = nil
	if _, err := New(ctx, Config{MemoryLimit: -1, Closers: []Closer{recordCloser{"c", &log}}}); err == nil {
		t.Fatal("New accepted a negative memory limit")
	}
	if strings.Join(log, ",") != "c" {
		t.Fatalf("failed New closed %v, want c", log)
	}
}
