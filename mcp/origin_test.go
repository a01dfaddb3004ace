package mcp

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wasmbox/wasmbox/wasmbox"
)

func TestNormalizeOrigin(t *testing.T) {
	good := map[string]string{
		"http://localhost:3000":   "http://localhost:3000",
		"HTTPS://App.Example:443": "https://app.example",
		"http://app.example:80/":  "http://app.example",
		"http://[::1]:8080":       "http://[::1]:8080",
		"https://a.example:8443":  "https://a.example:8443",
	}
	for in, want := range good {
		if got, err := NormalizeOrigin(in); err != nil || got != want {
			t.Errorf("NormalizeOrigin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "null", "*", "http://*.example", "ftp://a.example", "http://a.example/path",
		"http://u:p@a.example", "http://a.example?q", "a.example", "http://", "javascript:alert(1)",
		"http://a.example#f", "http://" + strings.Repeat("a", maxOriginLen)} {
		if got, err := NormalizeOrigin(in); err == nil {
			t.Errorf("NormalizeOrigin(%q) = %q, want an error", in, got)
		}
	}
}

// TestHostileClientOrigin: a web page the user visits must not drive the local HTTP server through the browser.
// Every request with an Origin the server does not allow gets 403 before the MCP handler sees it; allowed
// origins get CORS headers, and clients that are not browsers (no Origin) are unaffected.
func TestHostileClientOrigin(t *testing.T) {
	srv := NewServer(newSandbox(t, wasmbox.Config{}), ServerConfig{AllowedOrigins: []string{"https://app.example:8443", "not an origin"}})
	defer srv.Close(context.Background())
	hs := httptest.NewServer(srv.HTTPHandler())
	defer hs.Close()
	self := hs.URL // http://127.0.0.1:PORT
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	do := func(method string, hdr map[string]string) (*http.Response, string) {
		t.Helper()
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(initialize)
		}
		req, _ := http.NewRequest(method, hs.URL, body)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			if k != "Origin2" {
				req.Header.Set(k, v)
			}
		}
		if v, ok := hdr["Origin2"]; ok {
			req.Header.Add("Origin", v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	for _, tc := range []struct {
		name   string
		method string
		hdr    map[string]string
		want   int
	}{
		{"cross-origin page", http.MethodPost, map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"null origin (sandboxed iframe, file://)", http.MethodPost, map[string]string{"Origin": "null"}, http.StatusForbidden},
		{"another loopback port", http.MethodPost, map[string]string{"Origin": "http://127.0.0.1:1"}, http.StatusForbidden},
		{"allowed origin's other scheme", http.MethodPost, map[string]string{"Origin": "http://app.example:8443"}, http.StatusForbidden},
		{"an invalid allow entry matches nothing", http.MethodPost, map[string]string{"Origin": "not an origin"}, http.StatusForbidden},
		{"two Origin headers", http.MethodPost, map[string]string{"Origin": "https://app.example:8443", "Origin2": "https://evil.example"}, http.StatusForbidden},
		{"cross-site GET stream", http.MethodGet, map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"cross-site DELETE", http.MethodDelete, map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"cross-site preflight", http.MethodOptions, map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}, http.StatusForbidden},
		{"browser navigation from another site", http.MethodGet, map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"no Origin (not a browser)", http.MethodPost, nil, http.StatusOK},
		{"same origin on loopback", http.MethodPost, map[string]string{"Origin": self}, http.StatusOK},
		{"allowed origin", http.MethodPost, map[string]string{"Origin": "https://APP.example:8443"}, http.StatusOK},
		{"allowed preflight", http.MethodOptions, map[string]string{"Origin": "https://app.example:8443", "Access-Control-Request-Method": "POST"}, http.StatusNoContent},
	} {
		resp, body := do(tc.method, tc.hdr)
		if resp.StatusCode != tc.want {
			t.Errorf("%s: status %d, want %d (%s)", tc.name, resp.StatusCode, tc.want, body)
			continue
		}
		acao := resp.Header.Get("Access-Control-Allow-Origin")
		switch {
		case tc.want == http.StatusForbidden:
			if !strings.Contains(body, "Origin not allowed") || acao != "" {
				t.Errorf("%s: body %q, Access-Control-Allow-Origin %q", tc.name, body, acao)
			}
		case strings.HasPrefix(tc.name, "allowed"):
			if acao != "https://app.example:8443" || !strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "Mcp-Session-Id") {
				t.Errorf("%s: CORS headers %v", tc.name, resp.Header)
			}
			if tc.method == http.MethodOptions && !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Mcp-Session-Id") {
				t.Errorf("%s: preflight headers %v", tc.name, resp.Header)
			}
		default:
			if acao != "" {
				t.Errorf("%s: Access-Control-Allow-Origin %q on a request that needs none", tc.name, acao)
			}
		}
		if tc.want == http.StatusOK && !strings.Contains(body, `"serverInfo"`) {
			t.Errorf("%s: not an initialize answer: %s", tc.name, body)
		}
	}

	// The Go SDK's client (no Origin) still works end to end.
	ctx := context.Background()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: hs.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var out RunOut
	if e := callJSON(t, cs, "run_python", map[string]any{"code": "print(6 * 7)"}, &out); e != "" || out.Stdout != "42\n" {
		t.Fatalf("run_python: %q %+v", e, out)
	}
}
