package mcp

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// maxOriginLen bounds the Origin header the server parses; a longer one is refused.
const maxOriginLen = 2048

// NormalizeOrigin returns an origin as the server compares it: "scheme://host[:port]" with the scheme and host
// in lower case and the scheme's default port removed. It fails on anything else: a path, query, user
// information, a scheme other than http or https, "null", or a wildcard.
func NormalizeOrigin(s string) (string, error) {
	if s == "" || len(s) > maxOriginLen {
		return "", fmt.Errorf("mcp: origin %q: want scheme://host[:port] of at most %d bytes", s, maxOriginLen)
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("mcp: origin %q: %w", s, err)
	}
	scheme := strings.ToLower(u.Scheme)
	if (scheme != "http" && scheme != "https") || u.Host == "" || u.User != nil || u.Opaque != "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery ||
		strings.Contains(u.Host, "*") {
		return "", fmt.Errorf("mcp: origin %q: want scheme://host[:port] with scheme http or https", s)
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if host == "" {
		return "", fmt.Errorf("mcp: origin %q: no host", s)
	}
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	hp := host
	if strings.Contains(host, ":") {
		hp = "[" + host + "]"
	}
	if port != "" {
		hp += ":" + port
	}
	return scheme + "://" + hp, nil
}

// isLoopbackHost reports whether host (no port) names this machine's loopback interface.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// originPolicy decides which browser origins may reach the HTTP transport.
type originPolicy struct {
	allowed map[string]bool
}

func newOriginPolicy(origins []string) originPolicy {
	p := originPolicy{allowed: map[string]bool{}}
	for _, o := range origins {
		if n, err := NormalizeOrigin(o); err == nil {
			p.allowed[n] = true
		}
	}
	return p
}

// check returns the origin to name in CORS headers (empty for a request with no Origin or a same-origin one)
// and whether the request may proceed.
//
// A request without Origin comes from a client that is not a browser, or from a browser's own navigation: it
// proceeds unless Sec-Fetch-Site says a browser sent it from another site. A request with an Origin proceeds
// if that origin is in the allow list, or if it is the server's own origin on a loopback host (a page served by
// this server, which it does not serve today). Every other Origin, "null" included, is refused: a web page must
// not drive a local sandbox through the user's browser.
func (p originPolicy) check(r *http.Request) (cors string, ok bool) {
	vals := r.Header.Values("Origin")
	if len(vals) == 0 {
		switch r.Header.Get("Sec-Fetch-Site") {
		case "", "same-origin", "none":
			return "", true
		}
		return "", false
	}
	if len(vals) != 1 {
		return "", false
	}
	origin, err := NormalizeOrigin(vals[0])
	if err != nil {
		return "", false
	}
	if p.allowed[origin] {
		return origin, true
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	self, err := NormalizeOrigin(scheme + "://" + r.Host)
	if err != nil || origin != self {
		return "", false
	}
	u, _ := url.Parse(self)
	return "", isLoopbackHost(u.Hostname())
}

// wrap refuses requests from origins the policy does not allow (403, with a JSON-RPC error without id as the
// MCP transport specification describes) and answers CORS for allowed cross-origin ones.
func (p originPolicy) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cors, ok := p.check(r)
		if !ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","error":{"code":-32600,"message":"Forbidden: Origin not allowed"}}` + "\n"))
			return
		}
		if cors != "" {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", cors)
			h.Add("Vary", "Origin")
			h.Set("Access-Control-Expose-Headers", "Mcp-Session-Id, Mcp-Protocol-Version")
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
				h.Set("Access-Control-Allow-Headers", "Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID")
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
