package cli

import (
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	colmetric "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is a minimal OTLP/HTTP receiver on loopback: it decodes the protobuf requests the exporters
// send to /v1/traces and /v1/metrics and keeps them.
type otlpReceiver struct {
	mu      sync.Mutex
	traces  []*coltrace.ExportTraceServiceRequest
	metrics []*colmetric.ExportMetricsServiceRequest
	errs    []string
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(io.LimitReader(body, 64<<20))
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil || req.Header.Get("Content-Type") != "application/x-protobuf" {
		r.errs = append(r.errs, req.URL.Path+": "+req.Header.Get("Content-Type"))
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	switch req.URL.Path {
	case "/v1/traces":
		m := &coltrace.ExportTraceServiceRequest{}
		if err := proto.Unmarshal(b, m); err != nil {
			r.errs = append(r.errs, err.Error())
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.traces = append(r.traces, m)
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	case "/v1/metrics":
		m := &colmetric.ExportMetricsServiceRequest{}
		if err := proto.Unmarshal(b, m); err != nil {
			r.errs = append(r.errs, err.Error())
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.metrics = append(r.metrics, m)
		out, _ := proto.Marshal(&colmetric.ExportMetricsServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	default:
		r.errs = append(r.errs, "unexpected path "+req.URL.Path)
		http.NotFound(w, req)
	}
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch {
		case v.GetStringValue() != "":
			m[kv.GetKey()] = v.GetStringValue()
		default:
			m[kv.GetKey()] = strings.TrimSpace(strings.TrimPrefix(v.String(), ""))
		}
	}
	return m
}

// The CLI exports the run's span and metrics over OTLP/HTTP to the endpoint of the standard environment, with
// the service name it sets, as a child of TRACEPARENT's span.
func TestTelemetryOTLPExport(t *testing.T) {
	rcv := &otlpReceiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "wasmbox-cli-test")
	t.Setenv("TRACEPARENT", "00-"+traceID+"-"+parentID+"-01")
	code, out, errOut := cli(t, "", "run", "--json", "-c", "print(6 * 7)")
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	var res struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.errs) > 0 {
		t.Fatalf("receiver errors: %v", rcv.errs)
	}
	var run *tracepb.Span
	var service string
	for _, req := range rcv.traces {
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					if s.GetName() == "wasmbox.run" {
						run, service = s, attrs(rs.GetResource().GetAttributes())["service.name"]
					}
				}
			}
		}
	}
	if run == nil {
		t.Fatalf("no wasmbox.run span received (%d trace requests); stderr %s", len(rcv.traces), errOut)
	}
	a := attrs(run.GetAttributes())
	t.Logf("received over OTLP/HTTP: span %s trace %x parent %x service %s attributes %v", run.GetName(), run.GetTraceId(), run.GetParentSpanId(), service, a)
	if hex.EncodeToString(run.GetTraceId()) != traceID || hex.EncodeToString(run.GetParentSpanId()) != parentID {
		t.Errorf("span is in trace %x under %x, want TRACEPARENT's %s under %s", run.GetTraceId(), run.GetParentSpanId(), traceID, parentID)
	}
	if service != "wasmbox-cli-test" {
		t.Errorf("service.name %q", service)
	}
	if a["wasmbox.run.id"] != res.RunID || a["wasmbox.outcome"] != "ok" {
		t.Errorf("attributes %v, run id %s", a, res.RunID)
	}
	found := false
	for _, req := range rcv.metrics {
		for _, rm := range req.GetResourceMetrics() {
			for _, sm := range rm.GetScopeMetrics() {
				for _, m := range sm.GetMetrics() {
					if m.GetName() != "wasmbox.runs" {
						continue
					}
					for _, dp := range m.GetSum().GetDataPoints() {
						if pa := attrs(dp.GetAttributes()); pa["wasmbox.outcome"] == "ok" && dp.GetAsInt() == 1 {
							found = true
						}
					}
				}
			}
		}
	}
	if !found {
		t.Errorf("no wasmbox.runs{outcome=ok} = 1 among %d metric requests", len(rcv.metrics))
	}
}

// OTEL_TRACES_EXPORTER=console writes the spans to stderr, never into the program's output or the JSON.
func TestTelemetryConsole(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	code, out, errOut := cli(t, "", "run", "--json", "-c", "print(1)")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out)
	}
	if !strings.Contains(errOut, `"Name":"wasmbox.run"`) {
		t.Errorf("no span on stderr: %s", errOut)
	}
}

// Settings wasmbox cannot honour are usage errors, named; nothing runs.
func TestTelemetryBadSettings(t *testing.T) {
	for _, tc := range []struct{ key, value, want string }{
		{"OTEL_TRACES_EXPORTER", "zipkin", `unknown exporter "zipkin"`},
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "http/protobuf only"},
	} {
		t.Run(tc.value, func(t *testing.T) {
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
			t.Setenv(tc.key, tc.value)
			code, out, errOut := cli(t, "", "run", "-c", "print('ran')")
			if code != exitUsage || !strings.Contains(errOut, tc.want) || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
			}
		})
	}
}
