package approvals

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/wasmbox/wasmbox/governance"
)

// chromium returns the browser to drive: $WASMBOX_CHROMIUM, or chromium on PATH. Without one the test skips,
// except in CI (CI=true), where it fails.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("WASMBOX_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("WASMBOX_CHROMIUM=%s: %v", p, err)
		}
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const how = "no Chromium: install it (Debian: apt-get install -y chromium, or eval \"$(.ci/chromium.sh)\") or set WASMBOX_CHROMIUM to its path"
	if os.Getenv("CI") == "true" {
		t.Fatal(how)
	}
	t.Skip(how)
	return ""
}

// syncBuffer collects the browser's output for the failure message.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// post is a POST /decide that reached the handler, and what it answered.
type post struct {
	origin, fetchSite string
	cookie            bool
	status            int
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// TestBrowser drives the page in a real headless Chromium: what a person reads in the browser is exactly the
// arguments with their escapes, Approve and Deny record those decisions once, and a page of another origin that
// posts a decision in the same browser (which holds the page's cookie) decides nothing.
func TestBrowser(t *testing.T) {
	exe := chromium(t)
	g, _ := newGate(t)
	ctx := context.Background()
	pause(t, g, "task-plain", "approve_send", `{"to":"bob@example.com","body":"hello"}`)
	spoofArgs := "{\"to\":\"ops@example.com\",\"file\":\"report\u202efdp.exe\",\"note\":\"pay\u200bpal \u2066hidden\u2069\"," +
		"\"amount\":\"1\u00a0000\",\"esc\":\"\\u001b[31mred\",\"x\":\"</pre><b>bold</b>\"}"
	pause(t, g, "task-spoof", "approve_pay\u202e", spoofArgs)
	pending, err := g.PendingCalls(ctx, "", 0, 10)
	if err != nil || len(pending) != 2 {
		t.Fatalf("PendingCalls: %d, %v", len(pending), err)
	}

	// The approvals server, on a real loopback port, with every POST /decide it answers recorded.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	cfg := Config{Gate: g, DecidedBy: "approver:web", Addr: addr}
	h, err := NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var posts []post
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: 200}
		h.ServeHTTP(sw, r)
		if r.Method == http.MethodPost {
			_, err := r.Cookie("wasmbox_approvals_" + addr[strings.LastIndexByte(addr, ':')+1:])
			mu.Lock()
			posts = append(posts, post{origin: r.Header.Get("Origin"), fetchSite: r.Header.Get("Sec-Fetch-Site"), cookie: err == nil, status: sw.status})
			mu.Unlock()
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	base := "http://" + addr

	// The attacker: another origin (another port of the same host, so the same site: the browser sends the
	// SameSite=Strict cookie along) with a form that posts an approval as soon as it loads.
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!DOCTYPE html><html><body onload="document.forms[0].submit()">
<form method="post" action="%s/decide">
<input name="csrf" value="guessed"><input name="task" value="task-spoof"><input name="seq" value="1"><input name="action" value="approve">
</form></body></html>`, base)
	}))
	t.Cleanup(attacker.Close)

	// The browser, bounded as a whole: a hung browser ends with the test.
	bctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancel)
	var out syncBuffer
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 1000), chromedp.CombinedOutput(&out), chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("no-proxy-server", true), chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-domain-reliability", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(bctx, opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	fail := func(step string, err error) {
		t.Helper()
		t.Fatalf("%s: %v\nbrowser output:\n%s", step, err, out.String())
	}
	run := func(step string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			fail(step, err)
		}
	}
	text := func(step string, sel chromedp.CSS) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(sel))
		if err != nil {
			fail(step, err)
		}
		return s
	}

	// 1. The page shows each call's arguments exactly, with the escapes.
	run("load the page", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`pre.args[data-task="task-spoof"]`)))
	for _, p := range pending {
		pretty, _ := prettyArgs(p.Args)
		want := visibleString(pretty, true)
		got := text("read the arguments of "+p.TaskID, chromedp.CSS(fmt.Sprintf(`pre.args[data-task=%q][data-seq="%d"]`, p.TaskID, p.Seq)))
		if got != want {
			t.Errorf("%s: the browser shows\n%s\nwant\n%s", p.TaskID, got, want)
		}
		markers, err := chromedp.Run(bctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll('pre.args[data-task=%q] span.esc').length`, p.TaskID)))
		if err != nil {
			fail("count the escapes", err)
		}
		if n := strings.Count(want, "⟦"); markers != n {
			t.Errorf("%s: %d styled escapes, want %d", p.TaskID, markers, n)
		}
	}
	spoofText := text("read the spoofing arguments", chromedp.CSS(`pre.args[data-task="task-spoof"]`))
	for _, want := range []string{`"file": "report⟦U+202E⟧fdp.exe"`, `"note": "pay⟦U+200B⟧pal ⟦U+2066⟧hidden⟦U+2069⟧"`, `"amount": "1⟦U+00A0⟧000"`, `"esc": "\u001b[31mred"`} {
		if !strings.Contains(spoofText, want) {
			t.Errorf("the browser does not show %s in\n%s", want, spoofText)
		}
	}
	if tool := text("read the tool", chromedp.CSS(`section[data-task="task-spoof"] code.tool`)); tool != "approve_pay⟦U+202E⟧" {
		t.Errorf("the tool shows as %q", tool)
	}
	bold, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('b, script').length`))
	if err != nil {
		fail("look for injected elements", err)
	}
	if bold != 0 {
		t.Errorf("%d injected <b> or <script> elements in the page", bold)
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		fail("screenshot", err)
	}
	dir := os.Getenv("WASMBOX_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "approvals.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the approvals page: %s (%d bytes)", shot, len(png))

	// 2. Another origin posts an approval in the same browser: refused, nothing decided.
	run("load the attacker's page", chromedp.Navigate(attacker.URL))
	run("wait for the refusal", chromedp.WaitVisible(chromedp.CSS(`#message[data-status="403"]`)))
	mu.Lock()
	attack := append([]post(nil), posts...)
	mu.Unlock()
	if len(attack) != 1 || attack[0].origin != attacker.URL || attack[0].status != http.StatusForbidden {
		t.Fatalf("the attacker's POSTs reached the server as %+v, want one from %s refused with 403", attack, attacker.URL)
	}
	t.Logf("the attacker's POST: Origin %s, Sec-Fetch-Site %s, session cookie sent: %v, status %d",
		attack[0].origin, attack[0].fetchSite, attack[0].cookie, attack[0].status)
	if got, _ := g.PendingCalls(ctx, "", 0, 10); len(got) != 2 {
		t.Fatalf("after the attack %d calls pending, want 2", len(got))
	}
	for _, id := range []string{"task-plain", "task-spoof"} {
		if d := decisions(t, g, id); len(d) != 0 {
			t.Fatalf("the attack decided %s: %+v", id, d)
		}
	}

	// 3. Approve one, deny the other (with a name and a reason), through the page's buttons.
	run("approve task-plain", chromedp.Navigate(base+"/"), chromedp.Click(chromedp.CSS(`button.approve[data-task="task-plain"][data-seq="1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#result[data-task="task-plain"]`)))
	if s := text("read the result", chromedp.CSS("#result")); !strings.Contains(s, "was approved by approver:web") {
		t.Errorf("the result page says %q", s)
	}
	run("deny task-spoof", chromedp.Navigate(base+"/"),
		chromedp.SendKeys(chromedp.CSS(`section[data-task="task-spoof"] input[name="name"]`), "carol"),
		chromedp.SendKeys(chromedp.CSS(`section[data-task="task-spoof"] input[name="reason"]`), "spoofed file name"),
		chromedp.Click(chromedp.CSS(`button.deny[data-task="task-spoof"][data-seq="1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#result[data-task="task-spoof"]`)))
	if s := text("read the result", chromedp.CSS("#result")); !strings.Contains(s, "was denied by approver:web:carol") {
		t.Errorf("the result page says %q", s)
	}
	mu.Lock()
	for _, p := range posts[1:] {
		if p.origin != base || p.status != 200 || !p.cookie {
			t.Errorf("the page's own POST: %+v, want Origin %s, a cookie and 200", p, base)
		}
	}
	mu.Unlock()

	// 4. The gate recorded exactly these decisions, once.
	for id, want := range map[string]struct {
		decision, by, reason string
	}{
		"task-plain": {"allow", "approver:web", "approved on the approvals page"},
		"task-spoof": {"deny", "approver:web:carol", "spoofed file name"},
	} {
		d := decisions(t, g, id)
		if len(d) != 1 || d[0].Decision != want.decision || d[0].DecidedBy != want.by || !strings.HasPrefix(d[0].DecidedBy, cfg.DecidedBy) || d[0].Reason != want.reason {
			t.Errorf("%s: recorded %+v, want one %s by %s (%s)", id, d, want.decision, want.by, want.reason)
		}
		info, err := g.TaskInfo(ctx, id)
		if err != nil || info.Pending != nil {
			t.Errorf("%s: pending %+v, %v; want none", id, info.Pending, err)
		}
		if err := g.Decide(ctx, id, 1, governance.TaskDecision{Allow: true}); !errors.Is(err, governance.ErrAlreadyDecided) {
			t.Errorf("%s: a second Decide: %v, want ErrAlreadyDecided", id, err)
		}
	}
	if got, err := g.PendingCalls(ctx, "", 0, 10); err != nil || len(got) != 0 {
		t.Errorf("after the decisions: %d calls pending (%v), want 0", len(got), err)
	}
}
