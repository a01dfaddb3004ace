// Package oteltest helps tests check the spans that wasmbox's packages produce: a recording TracerProvider
// from the OpenTelemetry SDK's test exporter, and the spans printed as a tree. Only tests import it (it
// depends on the SDK; the library packages depend on the API alone).
package oteltest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Recorder is a TracerProvider that keeps every ended span in memory (synchronously, so a span is there as
// soon as it ends).
type Recorder struct {
	*sdktrace.TracerProvider
	Exporter *tracetest.InMemoryExporter
}

// NewRecorder returns a Recorder that samples every span; it is shut down when t ends.
func NewRecorder(t testing.TB) *Recorder {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	return &Recorder{TracerProvider: tp, Exporter: exp}
}

// Spans returns the spans ended so far, in the order they ended.
func (r *Recorder) Spans() tracetest.SpanStubs { return r.Exporter.GetSpans() }

// Named returns the ended spans whose name is name.
func (r *Recorder) Named(name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range r.Spans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// One returns the one ended span named name, and fails t unless there is exactly one.
func (r *Recorder) One(t testing.TB, name string) tracetest.SpanStub {
	t.Helper()
	s := r.Named(name)
	if len(s) != 1 {
		t.Fatalf("%d spans named %q, want 1; spans:\n%s", len(s), name, Tree(r.Spans()))
	}
	return s[0]
}

// Attr returns the value of the attribute key of s, and whether s has it.
func Attr(s tracetest.SpanStub, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// ChildOf reports whether s's parent is the span p (same trace, parent id p's span id).
func ChildOf(s, p tracetest.SpanStub) bool {
	return s.Parent.SpanID() == p.SpanContext.SpanID() && s.SpanContext.TraceID() == p.SpanContext.TraceID()
}

// Tree prints spans as a tree, indented by parent: each line has the span's name, its status and its
// attributes. Children are ordered by start time; spans whose parent is not among spans are roots.
func Tree(spans tracetest.SpanStubs) string {
	byID := map[trace.SpanID]bool{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID()] = true
	}
	children := map[trace.SpanID][]tracetest.SpanStub{}
	var roots []tracetest.SpanStub
	for _, s := range spans {
		if p := s.Parent.SpanID(); s.Parent.IsValid() && byID[p] {
			children[p] = append(children[p], s)
		} else {
			roots = append(roots, s)
		}
	}
	byStart := func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) }
	var b strings.Builder
	var walk func(s tracetest.SpanStub, depth int)
	walk = func(s tracetest.SpanStub, depth int) {
		fmt.Fprintf(&b, "%s%s [%s]", strings.Repeat("    ", depth), s.Name, s.Status.Code)
		if s.Status.Description != "" {
			fmt.Fprintf(&b, " %q", s.Status.Description)
		}
		attrs := slices.Clone(s.Attributes)
		slices.SortFunc(attrs, func(x, y attribute.KeyValue) int { return strings.Compare(string(x.Key), string(y.Key)) })
		for _, kv := range attrs {
			fmt.Fprintf(&b, " %s=%s", kv.Key, kv.Value.Emit())
		}
		b.WriteByte('\n')
		kids := children[s.SpanContext.SpanID()]
		slices.SortFunc(kids, byStart)
		for _, c := range kids {
			walk(c, depth+1)
		}
	}
	slices.SortFunc(roots, byStart)
	for _, r := range roots {
		walk(r, 0)
	}
	return b.String()
}
