package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/internal/termsafe"
)

const testAddr = "127.0.0.1:8080"

// testReason is the reason the test policy gives: it carries a raw ESC sequence and a bidi override, as a
// policy that quotes the call might.
const testReason = "a person must approve \x1b[31mthis\x1b[0m \u202eok"

// policy needs approval for the tools named "approve_*" and allows the others.
var policy = governance.PolicyFunc(func(_ context.Context, c governance.Call) (governance.Verdict, error) {
	if strings.HasPrefix(c.Tool, "approve_") {
		return governance.Verdict{Action: governance.NeedsApproval, Reason: testReason}, nil
	}
	return governance.Verdict{Action: governance.Allow, Effect: governance.Mutating}, nil
})

func newGate(t *testing.T) (*governance.Gate, *governance.MemoryStore) {
	t.Helper()
	store := new(governance.MemoryStore)
	g, err := governance.NewGate(governance.GateConfig{Store: store, Auditor: governance.DiscardAuditor{}, Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	return g, store
}

// pause starts a task whose first call, of tool with args, waits for a decision; it returns the pending call.
func pause(t *testing.T, g *governance.Gate, id, tool, args string) governance.PendingCall {
	t.Helper()
	ctx := context.Background()
	task, err := g.NewTask(ctx, governance.TaskOptions{ID: id, Fingerprint: "fp"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = task.Run().Do(ctx, governance.Call{Tool: tool, Args: json.RawMessage(args), Source: governance.SourcePython, Effect: governance.Mutating},
		func(context.Context, governance.Call) ([]byte, error) { return []byte(`"ran"`), nil })
	var paused *governance.PausedError
	if !errors.As(err, &paused) {
		t.Fatalf("call of %s: got %v, want a *PausedError", tool, err)
	}
	if err := task.End(ctx, 0, ""); err != nil {
		t.Fatal(err)
	}
	return paused.Pending
}

func newHandler(t *testing.T, g *governance.Gate) http.Handler {
	t.Helper()
	h, err := NewHandler(Config{Gate: g, DecidedBy: "approver:web", Addr: testAddr})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func do(h http.Handler, r *http.Request) (*http.Response, string) {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	resp := w.Result()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// session loads the page as a browser would and returns its session cookie and CSRF token.
func session(t *testing.T, h http.Handler) (*http.Cookie, string) {
	t.Helper()
	resp, body := do(h, httptest.NewRequest("GET", "http://"+testAddr+"/", nil))
	if resp.StatusCode != 200 {
		t.Fatalf("GET /: %d\n%s", resp.StatusCode, body)
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("GET / set cookies %v, want one HttpOnly SameSite=Strict session cookie", cookies)
	}
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", body)
	}
	return cookies[0], m[1]
}

// decideRequest is the POST the page's form makes, as a browser sends it.
func decideRequest(c *http.Cookie, token, task string, seq int64, action string) *http.Request {
	form := url.Values{"csrf": {token}, "task": {task}, "seq": {fmt.Sprint(seq)}, "action": {action}, "reason": {""}, "name": {"alice"}}
	r := httptest.NewRequest("POST", "http://"+testAddr+"/decide", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Origin", "http://"+testAddr)
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	if c != nil {
		r.AddCookie(c)
	}
	return r
}

// stillPending fails the test unless the call is still waiting for a decision.
func stillPending(t *testing.T, g *governance.Gate, p governance.PendingCall) {
	t.Helper()
	info, err := g.TaskInfo(context.Background(), p.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if info.Pending == nil || info.Pending.Seq != p.Seq {
		t.Fatalf("task %s: pending %+v, want call %d still pending", p.TaskID, info.Pending, p.Seq)
	}
	recs, err := g.TaskRecords(context.Background(), p.TaskID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Outcome == governance.StatusDecided {
			t.Fatalf("task %s: a decision was recorded: %+v", p.TaskID, r)
		}
	}
}

// decisions returns the decisions recorded in a task's audit chain.
func decisions(t *testing.T, g *governance.Gate, id string) []governance.Record {
	t.Helper()
	recs, err := g.TaskRecords(context.Background(), id, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []governance.Record
	for _, r := range recs {
		if r.Outcome == governance.StatusDecided {
			out = append(out, r)
		}
	}
	return out
}

func TestNewHandlerConfig(t *testing.T) {
	g, _ := newGate(t)
	noStore, err := governance.NewGate(governance.GateConfig{Auditor: governance.DiscardAuditor{}, Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []Config{
		{Addr: testAddr},
		{Gate: noStore, Addr: testAddr},
		{Gate: g},
		{Gate: g, Addr: ":8080"},
		{Gate: g, Addr: "0.0.0.0:8080"},
		{Gate: g, Addr: "[::]:8080"},
		{Gate: g, Addr: "127.0.0.1:0"},
		{Gate: g, Addr: "127.0.0.1:08080"},
		{Gate: g, Addr: "127.0.0.1"},
	} {
		if _, err := NewHandler(c); err == nil || !strings.HasPrefix(err.Error(), "approvals: ") {
			t.Errorf("NewHandler(%+v): err %v, want an approvals: error", c, err)
		}
	}
	if _, err := NewHandler(Config{Gate: g, Addr: "approvals.example:8443"}); err != nil {
		t.Errorf("a host name: %v", err)
	}
}

func TestSecurityHeaders(t *testing.T) {
	g, _ := newGate(t)
	h := newHandler(t, g)
	for _, r := range []*http.Request{
		httptest.NewRequest("GET", "http://"+testAddr+"/", nil),
		httptest.NewRequest("GET", "http://evil.example/", nil),
		httptest.NewRequest("GET", "http://"+testAddr+"/nothing", nil),
		decideRequest(nil, "", "t", 1, "approve"),
	} {
		resp, _ := do(h, r)
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "style-src 'nonce-", "form-action 'self'", "frame-ancestors 'none'", "base-uri 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s %s: CSP %q lacks %q", r.Method, r.URL, csp, want)
			}
		}
		for k, v := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin", "Cache-Control": "no-store"} {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("%s %s: %s %q, want %q", r.Method, r.URL, k, got, v)
			}
		}
	}
}

func TestHostChecked(t *testing.T) {
	g, _ := newGate(t)
	p := pause(t, g, "task-1", "approve_send", `{"to":"bob"}`)
	h := newHandler(t, g)
	for _, host := range []string{"evil.example", "evil.example:8080", "127.0.0.1:8081", "127.0.0.1", "localhost.:8080", ""} {
		r := httptest.NewRequest("GET", "http://"+testAddr+"/", nil)
		r.Host = host
		resp, body := do(h, r)
		if resp.StatusCode != http.StatusForbidden || strings.Contains(body, "approve_send") || len(resp.Cookies()) != 0 {
			t.Errorf("GET with Host %q: %d, cookies %v, want 403 without the calls", host, resp.StatusCode, resp.Cookies())
		}
	}
	for _, host := range []string{testAddr, "localhost:8080", "LOCALHOST:8080", "[::1]:8080"} {
		r := httptest.NewRequest("GET", "http://"+testAddr+"/", nil)
		r.Host = host
		if resp, body := do(h, r); resp.StatusCode != 200 || !strings.Contains(body, "approve_send") {
			t.Errorf("GET with Host %q: %d, want 200 with the calls", host, resp.StatusCode)
		}
	}
	// A rebinding page: right cookie and token (as if it had them), Host and Origin of its own name.
	c, token := session(t, h)
	r := decideRequest(c, token, p.TaskID, p.Seq, "approve")
	r.Host = "evil.example:8080"
	r.Header.Set("Origin", "http://evil.example:8080")
	if resp, _ := do(h, r); resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST with another Host: %d, want 403", resp.StatusCode)
	}
	stillPending(t, g, p)

	// Not loopback: only the exact host.
	hn, err := NewHandler(Config{Gate: g, Addr: "approvals.example:8443"})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]int{"approvals.example:8443": 200, "localhost:8443": 403, "127.0.0.1:8443": 403} {
		r := httptest.NewRequest("GET", "http://"+host+"/", nil)
		if resp, _ := do(hn, r); resp.StatusCode != want {
			t.Errorf("Addr approvals.example:8443, Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
}

func TestOriginChecked(t *testing.T) {
	g, _ := newGate(t)
	p := pause(t, g, "task-1", "approve_send", `{"to":"bob"}`)
	h := newHandler(t, g)
	c, token := session(t, h)
	for name, set := range map[string]func(*http.Request){
		"no Origin":              func(r *http.Request) { r.Header.Del("Origin") },
		"no Origin, same-origin": func(r *http.Request) { r.Header.Del("Origin"); r.Header.Set("Sec-Fetch-Site", "same-origin") },
		"Origin null":            func(r *http.Request) { r.Header.Set("Origin", "null") },
		"other port":             func(r *http.Request) { r.Header.Set("Origin", "http://127.0.0.1:9999") },
		"other host":             func(r *http.Request) { r.Header.Set("Origin", "http://evil.example") },
		"https":                  func(r *http.Request) { r.Header.Set("Origin", "https://"+testAddr) },
		"other name of the host": func(r *http.Request) { r.Header.Set("Origin", "http://localhost:8080") },
		"two Origins":            func(r *http.Request) { r.Header.Add("Origin", "http://evil.example") },
		"same-site":              func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "same-site") },
		"cross-site":             func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") },
	} {
		r := decideRequest(c, token, p.TaskID, p.Seq, "approve")
		set(r)
		if resp, body := do(h, r); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "nothing was decided") {
			t.Errorf("%s: %d, want 403 saying nothing was decided\n%s", name, resp.StatusCode, body)
		}
	}
	stillPending(t, g, p)
}

func TestCSRFChecked(t *testing.T) {
	g, _ := newGate(t)
	p := pause(t, g, "task-1", "approve_send", `{"to":"bob"}`)
	h := newHandler(t, g)
	c, token := session(t, h)
	c2, token2 := session(t, h)                   // another browser's session
	_, otherToken := session(t, newHandler(t, g)) // another server's secret (a restart)
	forged := &http.Cookie{Name: c.Name, Value: strings.Repeat("A", 43)}
	for name, r := range map[string]*http.Request{
		"no token":                 decideRequest(c, "", p.TaskID, p.Seq, "approve"),
		"wrong token":              decideRequest(c, strings.Repeat("x", len(token)), p.TaskID, p.Seq, "approve"),
		"no cookie":                decideRequest(nil, token, p.TaskID, p.Seq, "approve"),
		"another session's token":  decideRequest(c, token2, p.TaskID, p.Seq, "approve"),
		"another session's cookie": decideRequest(c2, token, p.TaskID, p.Seq, "approve"),
		"another server's token":   decideRequest(c, otherToken, p.TaskID, p.Seq, "approve"),
		"forged cookie":            decideRequest(forged, token, p.TaskID, p.Seq, "approve"),
	} {
		if resp, body := do(h, r); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "CSRF") {
			t.Errorf("%s: %d, want 403 (CSRF)\n%s", name, resp.StatusCode, body)
		}
	}
	// Two tokens in the form, one of them right.
	form := url.Values{"csrf": {"x", token}, "task": {p.TaskID}, "seq": {"1"}, "action": {"approve"}}
	r := decideRequest(c, token, p.TaskID, p.Seq, "approve")
	r.Body = io.NopCloser(strings.NewReader(form.Encode()))
	r.ContentLength = int64(len(form.Encode()))
	if resp, _ := do(h, r); resp.StatusCode != http.StatusForbidden {
		t.Errorf("two CSRF fields: %d, want 403", resp.StatusCode)
	}
	stillPending(t, g, p)
}

func TestRequestShapeChecked(t *testing.T) {
	g, _ := newGate(t)
	p := pause(t, g, "task-1", "approve_send", `{"to":"bob"}`)
	h := newHandler(t, g)
	c, token := session(t, h)

	// GET never decides, whatever its query.
	q := url.Values{"csrf": {token}, "task": {p.TaskID}, "seq": {"1"}, "action": {"approve"}}.Encode()
	for _, u := range []string{"/decide?" + q, "/?" + q} {
		r := httptest.NewRequest("GET", "http://"+testAddr+u, nil)
		r.AddCookie(c)
		r.Header.Set("Origin", "http://"+testAddr)
		resp, _ := do(h, r)
		if want := map[bool]int{true: 405, false: 200}[strings.HasPrefix(u, "/decide")]; resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", u, resp.StatusCode, want)
		}
	}
	for _, m := range []string{"PUT", "DELETE", "PATCH"} {
		r := decideRequest(c, token, p.TaskID, p.Seq, "approve")
		r.Method = m
		if resp, _ := do(h, r); resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s /decide: %d, want 405", m, resp.StatusCode)
		}
	}
	r := decideRequest(c, token, p.TaskID, p.Seq, "approve")
	r.URL.Path = "/"
	if resp, _ := do(h, r); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d, want 405", resp.StatusCode)
	}
	for _, ct := range []string{"", "text/plain", "multipart/form-data; boundary=x", "application/json"} {
		r := decideRequest(c, token, p.TaskID, p.Seq, "approve")
		r.Header.Set("Content-Type", ct)
		if resp, _ := do(h, r); resp.StatusCode != http.StatusUnsupportedMediaType {
			t.Errorf("Content-Type %q: %d, want 415", ct, resp.StatusCode)
		}
	}
	// Too large, with a Content-Length and without one (chunked).
	big := url.Values{"csrf": {token}, "task": {p.TaskID}, "seq": {"1"}, "action": {"approve"}, "reason": {strings.Repeat("r", MaxBodyBytes)}}.Encode()
	for _, length := range []int64{int64(len(big)), -1} {
		r := decideRequest(c, token, p.TaskID, p.Seq, "approve")
		r.Body = io.NopCloser(strings.NewReader(big))
		r.ContentLength = length
		if resp, _ := do(h, r); resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("a %d-byte body (Content-Length %d): %d, want 413", len(big), length, resp.StatusCode)
		}
	}
	for name, form := range map[string]url.Values{
		"no action":    {"task": {p.TaskID}, "seq": {"1"}},
		"other action": {"task": {p.TaskID}, "seq": {"1"}, "action": {"allow"}},
		"bad seq":      {"task": {p.TaskID}, "seq": {"1x"}, "action": {"approve"}},
		"two actions":  {"task": {p.TaskID}, "seq": {"1"}, "action": {"deny", "approve"}},
		"long reason":  {"task": {p.TaskID}, "seq": {"1"}, "action": {"approve"}, "reason": {strings.Repeat("é", maxReasonBytes/2+1)}},
	} {
		form.Set("csrf", token)
		r := decideRequest(c, token, p.TaskID, p.Seq, "approve")
		r.Body = io.NopCloser(strings.NewReader(form.Encode()))
		r.ContentLength = int64(len(form.Encode()))
		if resp, _ := do(h, r); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", name, resp.StatusCode)
		}
	}
	stillPending(t, g, p)
}

func TestDecideOnce(t *testing.T) {
	g, _ := newGate(t)
	p := pause(t, g, "task-1", "approve_send", `{"to":"bob"}`)
	q := pause(t, g, "task-2", "approve_pay", `{"amount":5}`)
	h := newHandler(t, g)
	c, token := session(t, h)

	form := url.Values{"csrf": {token}, "task": {p.TaskID}, "seq": {"1"}, "action": {"approve"},
		"reason": {"looks fine \u202e"}, "name": {"alice <b>\u202e:x"}}
	r := decideRequest(c, token, p.TaskID, p.Seq, "approve")
	r.Body = io.NopCloser(strings.NewReader(form.Encode()))
	r.ContentLength = int64(len(form.Encode()))
	resp, body := do(h, r)
	if resp.StatusCode != 200 || !strings.Contains(body, `data-allowed="true"`) || !strings.Contains(body, "approver:web:alicebx") {
		t.Fatalf("approve: %d\n%.2000s", resp.StatusCode, body)
	}
	d := decisions(t, g, p.TaskID)
	if len(d) != 1 || d[0].Decision != "allow" || d[0].DecidedBy != "approver:web:alicebx" || d[0].Reason != "looks fine ⟦U+202E⟧" {
		t.Fatalf("recorded %+v, want one allow by approver:web:alicebx", d)
	}
	if err := g.Decide(context.Background(), p.TaskID, p.Seq, governance.TaskDecision{Allow: false}); !errors.Is(err, governance.ErrAlreadyDecided) {
		t.Fatalf("a second Decide: %v, want ErrAlreadyDecided", err)
	}
	for _, action := range []string{"approve", "deny"} {
		resp, body := do(h, decideRequest(c, token, p.TaskID, p.Seq, action))
		if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "Already decided") || !strings.Contains(body, "first decision stands") {
			t.Errorf("a second %s: %d, want 409 Already decided\n%s", action, resp.StatusCode, body)
		}
	}
	if d := decisions(t, g, p.TaskID); len(d) != 1 {
		t.Errorf("%d decisions recorded, want 1", len(d))
	}
	if resp, body := do(h, decideRequest(c, token, p.TaskID, 7, "deny")); resp.StatusCode != http.StatusConflict || !strings.Contains(body, "Not pending") {
		t.Errorf("a call that is not pending: %d\n%s", resp.StatusCode, body)
	}
	if resp, _ := do(h, decideRequest(c, token, "no-such-task", 1, "deny")); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown task: %d, want 404", resp.StatusCode)
	}
	if resp, _ := do(h, decideRequest(c, token, "../x", 1, "deny")); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an invalid task ID: %d, want 404", resp.StatusCode)
	}

	// Racing decisions on the other call: exactly one is recorded.
	var wg sync.WaitGroup
	codes := make(chan int, 8)
	for i := range 8 {
		wg.Go(func() {
			resp, _ := do(h, decideRequest(c, token, q.TaskID, q.Seq, []string{"approve", "deny"}[i%2]))
			codes <- resp.StatusCode
		})
	}
	wg.Wait()
	close(codes)
	n := map[int]int{}
	for code := range codes {
		n[code]++
	}
	if n[200] != 1 || n[409] != 7 {
		t.Errorf("8 racing decisions: status counts %v, want one 200 and seven 409", n)
	}
	if d := decisions(t, g, q.TaskID); len(d) != 1 || d[0].DecidedBy != "approver:web:alice" {
		t.Errorf("racing decisions recorded %+v, want one by approver:web:alice", d)
	}
	// The page now lists nothing.
	if resp, body := do(h, httptest.NewRequest("GET", "http://"+testAddr+"/", nil)); resp.StatusCode != 200 || strings.Contains(body, `<pre class="args"`) {
		t.Errorf("after the decisions the page still lists calls: %d\n%s", resp.StatusCode, body)
	}
}

func TestArgsShownExactly(t *testing.T) {
	g, _ := newGate(t)
	long := strings.Repeat("0123456789abcdef", 100<<10/16) + "END-OF-LONG-VALUE"
	// Raw U+202E, U+200B and U+2028 in the JSON text, a JSON-escaped ESC, a byte that is not UTF-8, markup.
	args := "{\"file\":\"invoice\u202efdp.exe\",\"zw\":\"pay\u200bpal\",\"sep\":\"line\u2028two\",\"esc\":\"\\u001b[31mred\"," +
		"\"bad\":\"x\xff\",\"html\":\"</pre><script>alert(1)</script>\",\"long\":\"" + long + "\"}"
	pause(t, g, "task-1", "approve_<script>alert(2)</script>\u202e", args)
	pending, err := g.PendingCalls(context.Background(), "", 0, 10)
	if err != nil || len(pending) != 1 {
		t.Fatalf("PendingCalls: %d calls, %v", len(pending), err)
	}
	p := pending[0] // as the store keeps it
	h := newHandler(t, g)
	resp, body := do(h, httptest.NewRequest("GET", "http://"+testAddr+"/", nil))
	if resp.StatusCode != 200 {
		t.Fatalf("GET /: %d", resp.StatusCode)
	}
	for _, raw := range []string{"\u202e", "\u200b", "\u2028", "\x1b", "\xff", "<script", "</pre><"} {
		if strings.Contains(body, raw) {
			t.Errorf("the page contains %q raw", raw)
		}
	}
	page := html.UnescapeString(body) // the markup stays; the text is as the browser shows it
	for _, want := range []string{
		`"file": "invoice<span class="esc">⟦U+202E⟧</span>fdp.exe"`,
		`"zw": "pay<span class="esc">⟦U+200B⟧</span>pal"`,
		`"esc": "\u001b[31mred"`, // a JSON escape: already visible as text
		`"bad": "x<span class="esc">⟦0xFF⟧</span>"`,
		`"long": "` + long + `"`,
		`<code class="tool">approve_<script>alert(2)</script><span class="esc">⟦U+202E⟧</span></code>`,
		`a person must approve <span class="esc">⟦U+001B⟧</span>[31mthis<span class="esc">⟦U+001B⟧</span>[0m <span class="esc">⟦U+202E⟧</span>ok`,
		fmt.Sprintf("Arguments (%d bytes", len(p.Args)),
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %.200q", want)
		}
	}
	// The store keeps arguments as encoding/json writes them, which may escape U+2028 and markup: either form
	// is the same JSON, and visible.
	for _, want := range [][]string{
		{`"sep": "line<span class="esc">⟦U+2028⟧</span>two"`, `"sep": "line\u2028two"`},
		{`"html": "</pre><script>alert(1)</script>"`, `"html": "\u003c/pre\u003e\u003cscript\u003ealert(1)\u003c/script\u003e"`},
	} {
		if !strings.Contains(page, want[0]) && !strings.Contains(page, want[1]) {
			t.Errorf("the page lacks %q", want[0])
		}
	}
	// The whole <pre> is the indented JSON with the escapes, nothing more or less.
	pretty, _ := prettyArgs(p.Args)
	pre := regexp.MustCompile(`(?s)<pre class="args"[^>]*>\n(.*?)</pre>`).FindStringSubmatch(body)
	if pre == nil {
		t.Fatal("no <pre> of arguments")
	}
	text := html.UnescapeString(strings.NewReplacer(`<span class="esc">`, "", `</span>`, "").Replace(pre[1]))
	if want := visibleString(pretty, true); text != want {
		t.Errorf("the <pre> shows %d bytes, want %d", len(text), len(want))
	}
}

func TestVisible(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain text, é 日本 e\u0301", "plain text, é 日本 e\u0301"},
		{"a\u202ab\u202bc\u202cd\u202de\u202ef", "a⟦U+202A⟧b⟦U+202B⟧c⟦U+202C⟧d⟦U+202D⟧e⟦U+202E⟧f"},
		{"\u2066\u2067\u2068\u2069\u200e\u200f\u061c", "⟦U+2066⟧⟦U+2067⟧⟦U+2068⟧⟦U+2069⟧⟦U+200E⟧⟦U+200F⟧⟦U+061C⟧"},
		{"\u200b\u200c\u200d\ufeff\u2060\u00ad", "⟦U+200B⟧⟦U+200C⟧⟦U+200D⟧⟦U+FEFF⟧⟦U+2060⟧⟦U+00AD⟧"},
		{"\u2028\u2029\u00a0\u3000\u3164\u2800", "⟦U+2028⟧⟦U+2029⟧⟦U+00A0⟧⟦U+3000⟧⟦U+3164⟧⟦U+2800⟧"},
		{"\x1b[31m\r\t\x00\x7f\u0085", "⟦U+001B⟧[31m⟦U+000D⟧⟦U+0009⟧⟦U+0000⟧⟦U+007F⟧⟦U+0085⟧"},
		{"\ufe0f\U000e0041\U000f0000\ue000", "⟦U+FE0F⟧⟦U+E0041⟧⟦U+F0000⟧⟦U+E000⟧"},
		{"fake ⟦U+202E⟧", "fake ⟦U+27E6⟧U+202E⟦U+27E7⟧"},
		{"bad\xff\xc3 \ufffd", "bad⟦0xFF⟧⟦0xC3⟧ ⟦U+FFFD⟧"},
		{"two\nlines", "two⟦U+000A⟧lines"},
	} {
		if got := visibleString(c.in, false); got != c.want {
			t.Errorf("visible(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := visibleString("a\n\tb\u2028", true); got != "a\n⟦U+0009⟧b⟦U+2028⟧" {
		t.Errorf("visible with newlines: %q", got)
	}
	// At least as strict as the terminal approver's escaping, for every rune.
	for r := rune(0); r <= 0x10ffff; r++ {
		if s := string(r); termsafe.Clean(s) != s && !hides(r) {
			t.Fatalf("U+%04X is escaped by termsafe but not here", r)
		}
	}
}

func TestStoreUnreachable(t *testing.T) {
	g, store := newGate(t)
	p := pause(t, g, "task-1", "approve_send", `{"to":"bob"}`)
	h := newHandler(t, g)
	c, token := session(t, h)
	store.Fail = func() error { return errors.New("disk on fire") }
	if resp, body := do(h, httptest.NewRequest("GET", "http://"+testAddr+"/", nil)); resp.StatusCode != http.StatusServiceUnavailable ||
		!strings.Contains(body, "Store unreachable") || !strings.Contains(body, "disk on fire") {
		t.Errorf("GET with the store down: %d\n%s", resp.StatusCode, body)
	}
	if resp, body := do(h, decideRequest(c, token, p.TaskID, p.Seq, "approve")); resp.StatusCode != http.StatusServiceUnavailable ||
		!strings.Contains(body, "nothing was decided") {
		t.Errorf("POST with the store down: %d\n%s", resp.StatusCode, body)
	}
	store.Fail = nil
	stillPending(t, g, p)
}

func TestPagination(t *testing.T) {
	g, _ := newGate(t)
	for i := range MaxShown + 2 {
		pause(t, g, fmt.Sprintf("task-%04d", i), "approve_send", `{"n":1}`)
	}
	h := newHandler(t, g)
	resp, body := do(h, httptest.NewRequest("GET", "http://"+testAddr+"/", nil))
	if resp.StatusCode != 200 {
		t.Fatalf("GET /: %d", resp.StatusCode)
	}
	if n := strings.Count(body, `<pre class="args"`); n != MaxShown {
		t.Errorf("%d calls listed, want %d", n, MaxShown)
	}
	if !strings.Contains(body, `id="more"`) || !strings.Contains(body, `data-task="task-0499"`) || strings.Contains(body, `data-task="task-0500"`) {
		t.Errorf("the page does not list the first %d calls in order and say more wait", MaxShown)
	}
}
