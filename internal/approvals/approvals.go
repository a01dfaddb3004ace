// Package approvals serves a web page on which a person decides the calls that durable tasks wait on: it lists
// every pending call of a governance store with its complete arguments, and records Approve or Deny through
// [governance.Gate.Decide].
//
// # What the page shows
//
// Everything that came from the sandbox (tool names, reasons, task IDs, arguments) is HTML-escaped by
// html/template, and every character that could hide or disguise text is shown as a visible, distinctly styled
// escape instead: ⟦U+202E⟧ for a rune (controls, bidi overrides and isolates, zero-width and other format
// characters, line and paragraph separators, spaces other than U+0020, private-use, unassigned and
// default-ignorable code points, variation selectors, U+2800 and U+FFFD), ⟦0xFF⟧ for a byte that is not UTF-8. The brackets
// themselves are escaped when they occur in the data (⟦U+27E6⟧, ⟦U+27E7⟧), so every ⟦ on the page starts an
// escape. Arguments are pretty-printed JSON (json.Indent, which keeps every string as the tool receives it,
// \u escapes included) and are never shortened: what the person reads is what the tool gets. The page shows at
// most [MaxShown] calls (and stops before [MaxShownArgsBytes] of arguments) and says so when more wait.
//
// # Security model
//
// The page has no login. Anyone who can reach it and pass the checks below can decide any pending call, so it
// must listen on loopback (the default of `wasmbox approvals serve`); to expose it further, put it behind your
// own authentication (an SSH tunnel, or an authenticating proxy that forwards to Config.Addr and preserves the
// Host and Origin the browser would send to it). The checks are against other web pages the person's browser
// visits (cross-site request forgery, DNS rebinding, clickjacking), not against local users:
//
//   - Host: every request, GET included, must carry a Host header equal to Config.Addr (when Addr is a
//     loopback address or localhost, also localhost, 127.0.0.1 or [::1] with the same port); anything else is
//     refused with 403. This defeats DNS rebinding: a page on attacker.example that rebinds its name to
//     127.0.0.1 still sends Host: attacker.example.
//   - POST /decide is the only request that changes anything. It is refused unless: the method is POST (405);
//     there is exactly one Origin header and it equals http:// followed by the request's (checked) Host — a
//     request without Origin, or with Origin "null", is refused, since every current browser sends Origin on
//     a form POST (403); Sec-Fetch-Site, when present, is "same-origin" (403); the Content-Type is
//     application/x-www-form-urlencoded (415); the body is at most [MaxBodyBytes] (413); and the form's CSRF
//     token is valid (403). The token is HMAC-SHA256, under a random secret made by NewHandler, of a random
//     per-browser session cookie (HttpOnly, SameSite=Strict, set by GET /), compared in constant time: a page
//     of another origin can neither read the token nor compute it, even one on another port of the same host
//     (which shares the cookie, because cookies ignore ports). A restarted server has a new secret, so forms
//     from before the restart are refused: reload the page.
//   - Every response has Content-Security-Policy "default-src 'none'; style-src 'nonce-…'; form-action 'self';
//     frame-ancestors 'none'; base-uri 'none'" (the page runs no JavaScript), X-Frame-Options DENY,
//     X-Content-Type-Options nosniff, Cache-Control no-store, Cross-Origin-Opener-Policy and
//     Cross-Origin-Resource-Policy same-origin, and Referrer-Policy same-origin. (Not no-referrer: under that
//     policy browsers send "Origin: null" with a form POST, which would make the Origin check impossible; the
//     page links nowhere else, so same-origin leaks nothing.)
//
// A decision is recorded as DecidedBy Config.DecidedBy, followed by ":" and the name typed in the form, if any
// (at most 64 letters, digits and ._@-; other characters are dropped). A second decision on a call is refused
// by the store and the page says so; the first one stands. When the store cannot be reached the page says so
// with status 503 and nothing is decided.
package approvals

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/wasmbox/wasmbox/governance"
)

// The bounds of the page and of a decision.
const (
	// MaxShown is the most pending calls the page lists at once.
	MaxShown = 500
	// MaxShownArgsBytes bounds the arguments of the calls listed at once (the first call is always listed,
	// whatever its size): the page then says that more calls wait.
	MaxShownArgsBytes = 16 << 20
	// MaxBodyBytes bounds the body of POST /decide.
	MaxBodyBytes = 16 << 10
	// maxReasonBytes bounds the reason typed in the form (the input allows 1000 characters).
	maxReasonBytes = 4000
	// maxNameBytes bounds the name field as received; maxNameRunes bounds it after cleaning.
	maxNameBytes = 256
	maxNameRunes = 64
)

// Config configures [NewHandler].
type Config struct {
	// Gate decides the calls; it must have a Store (governance.GateConfig.Store). Required.
	Gate *governance.Gate
	// DecidedBy prefixes who decided, e.g. "approver:web" (the default when empty); the name typed in the form
	// (if any, bounded, cleaned) is appended as ":NAME".
	DecidedBy string
	// Addr is the host:port the server listens on (the listener's address, with a nonzero port and a host, not
	// 0.0.0.0 or ::); the Host header must be exactly it (or localhost/127.0.0.1/[::1] with that port when
	// Addr is loopback). Required.
	Addr string
}

type handler struct {
	gate   *governance.Gate
	by     string
	hosts  map[string]bool // the Host values accepted, lowercase
	cookie string          // the session cookie's name (per port: cookies of one host are shared by its ports)
	secret []byte          // the CSRF key
}

// NewHandler returns the approvals page: GET / lists the pending calls, POST /decide records a decision. See
// the package documentation for what it checks.
func NewHandler(cfg Config) (http.Handler, error) {
	if cfg.Gate == nil {
		return nil, errors.New("approvals: Config.Gate is nil")
	}
	if cfg.Gate.Store() == nil {
		return nil, fmt.Errorf("approvals: Config.Gate: %w", governance.ErrNoStore)
	}
	hosts, port, err := allowedHosts(cfg.Addr)
	if err != nil {
		return nil, err
	}
	by := cfg.DecidedBy
	if by == "" {
		by = "approver:web"
	}
	h := &handler{gate: cfg.Gate, by: by, hosts: hosts, cookie: "wasmbox_approvals_" + port, secret: make([]byte, 32)}
	if _, err := rand.Read(h.secret); err != nil {
		return nil, fmt.Errorf("approvals: CSRF secret: %w", err)
	}
	return h, nil
}

// allowedHosts returns the Host header values that name addr, and its port.
func allowedHosts(addr string) (map[string]bool, string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, "", fmt.Errorf("approvals: Config.Addr %q: %w", addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return nil, "", fmt.Errorf("approvals: Config.Addr %q: want a port from 1 to 65535 (the listener's address)", addr)
	}
	host = strings.ToLower(host)
	ip := net.ParseIP(host)
	switch {
	case host == "":
		return nil, "", fmt.Errorf("approvals: Config.Addr %q has no host: the Host header is checked against it", addr)
	case ip != nil && ip.IsUnspecified():
		return nil, "", fmt.Errorf("approvals: Config.Addr %q is every address: give the one host name or address browsers use", addr)
	case strings.ContainsAny(host, "/%@ ") || strings.HasSuffix(host, "."):
		return nil, "", fmt.Errorf("approvals: Config.Addr %q: invalid host", addr)
	}
	if ip != nil {
		host = ip.String()
	}
	hosts := map[string]bool{net.JoinHostPort(host, port): true}
	if host == "localhost" || (ip != nil && ip.IsLoopback()) {
		for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
			hosts[net.JoinHostPort(h, port)] = true
		}
	}
	return hosts, port, nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var nb [16]byte
	_, _ = rand.Read(nb[:])
	nonce := base64.RawStdEncoding.EncodeToString(nb[:])
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'nonce-"+nonce+"'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
	p := &pageData{Nonce: nonce}

	if !h.hosts[strings.ToLower(r.Host)] {
		h.fail(w, p, http.StatusForbidden, "Wrong host", "This page answers only to its own address (Host "+visibleString(r.Host, false)+" refused): nothing was decided.")
		return
	}
	switch r.URL.Path {
	case "/":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			hd.Set("Allow", "GET, HEAD")
			h.fail(w, p, http.StatusMethodNotAllowed, "Method not allowed", "Use GET for this page.")
			return
		}
		h.list(w, r, p)
	case "/decide":
		if r.Method != http.MethodPost {
			hd.Set("Allow", "POST")
			h.fail(w, p, http.StatusMethodNotAllowed, "Method not allowed", "Decisions are made with the page's buttons (POST): nothing was decided.")
			return
		}
		h.decide(w, r, p)
	default:
		h.fail(w, p, http.StatusNotFound, "Not found", "There is nothing here.")
	}
}

// seg is a piece of text to show: plain, or the visible escape of a character that could hide text.
type seg struct {
	Text string
	Esc  bool
}

// hides reports whether r could hide or disguise text, and is therefore shown as an escape. It is a superset
// of what termsafe.Clean escapes (!unicode.IsPrint).
func hides(r rune) bool {
	switch {
	case r == ' ':
		return false
	case !unicode.IsPrint(r): // Cc, Cf (bidi, zero-width, U+FEFF, U+2060, tags), Zl, Zp, other Zs, Co, Cs, Cn
		return true
	case r == '⟦' || r == '⟧' || r == '\u2800' || r == utf8.RuneError:
		// The escape's brackets; BRAILLE PATTERN BLANK, which looks like a space; U+FFFD, which looks like a
		// byte that is not UTF-8.
		return true
	}
	return unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector)
}

// visible splits s into plain text and escapes: every rune that hides reports becomes ⟦U+XXXX⟧, every byte
// that is not UTF-8 ⟦0xNN⟧. With newlines, '\n' is kept as a line break (for pretty-printed JSON, where raw
// newlines are only layout); otherwise it is escaped too.
func visible(s string, newlines bool) []seg {
	var out []seg
	start := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		var esc string
		switch {
		case r == utf8.RuneError && size == 1:
			esc = fmt.Sprintf("⟦0x%02X⟧", s[i])
		case r == '\n' && newlines:
		case hides(r):
			esc = fmt.Sprintf("⟦U+%04X⟧", r)
		}
		if esc != "" {
			if start < i {
				out = append(out, seg{Text: s[start:i]})
			}
			out = append(out, seg{Text: esc, Esc: true})
			start = i + size
		}
		i += size
	}
	if start < len(s) {
		out = append(out, seg{Text: s[start:]})
	}
	return out
}

// visibleString is visible joined into one string: the text a person reads on the page.
func visibleString(s string, newlines bool) string {
	var b strings.Builder
	for _, sg := range visible(s, newlines) {
		b.WriteString(sg.Text)
	}
	return b.String()
}

// prettyArgs returns the arguments as shown: indented JSON, or the bytes as received with a note if they are
// not JSON.
func prettyArgs(args json.RawMessage) (string, string) {
	if len(args) == 0 {
		return "", "no arguments"
	}
	var b bytes.Buffer
	if err := json.Indent(&b, args, "", "  "); err != nil {
		return string(args), "not valid JSON: shown as received"
	}
	return b.String(), ""
}

type pageData struct {
	Nonce   string
	Title   string
	Status  int
	Message string
	// The list.
	CSRF  string
	Calls []callView
	More  bool
	// The result of a decision.
	Result *resultView
}

type callView struct {
	TaskID         string // as in the store (the pattern [A-Za-z0-9._-] of governance task IDs), for the form
	Task           []seg
	Seq            int64
	Tool           []seg
	Effect         string
	Cost           int64
	Reason         []seg
	Since          string
	OutcomeUnknown bool
	Args           []seg
	ArgsBytes      int
	ArgsNote       string
}

type resultView struct {
	TaskID    string
	Task      []seg
	Seq       int64
	Allowed   bool
	DecidedBy []seg
	Reason    []seg
}

func (h *handler) list(w http.ResponseWriter, r *http.Request, p *pageData) {
	session := h.session(r)
	if session == "" {
		var b [32]byte
		_, _ = rand.Read(b[:])
		session = base64.RawURLEncoding.EncodeToString(b[:])
		http.SetCookie(w, &http.Cookie{Name: h.cookie, Value: session, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	}
	p.CSRF = h.token(session)
	var calls []governance.PendingCall
	afterTask, afterSeq, argBytes := "", int64(0), 0
scan:
	for {
		page, err := h.gate.PendingCalls(r.Context(), afterTask, afterSeq, min(100, MaxShown+1-len(calls)))
		if err != nil {
			h.storeFailed(w, p, err)
			return
		}
		if len(page) == 0 {
			break
		}
		for _, c := range page {
			if len(calls) == MaxShown || (len(calls) > 0 && argBytes+len(c.Args) > MaxShownArgsBytes) {
				p.More = true
				break scan
			}
			calls = append(calls, c)
			argBytes += len(c.Args)
		}
		last := page[len(page)-1]
		afterTask, afterSeq = last.TaskID, last.Seq
	}
	for _, c := range calls {
		args, note := prettyArgs(c.Args)
		p.Calls = append(p.Calls, callView{TaskID: c.TaskID, Task: visible(c.TaskID, false), Seq: c.Seq, Tool: visible(c.Tool, false),
			Effect: c.Effect.Resolve().String(), Cost: c.Cost, Reason: visible(c.Reason, false), Since: c.Since.UTC().Format(time.RFC3339),
			OutcomeUnknown: c.OutcomeUnknown, Args: visible(args, true), ArgsBytes: len(c.Args), ArgsNote: note})
	}
	p.Title, p.Status = "Pending approvals", http.StatusOK
	h.render(w, p)
}

func (h *handler) decide(w http.ResponseWriter, r *http.Request, p *pageData) {
	const nothing = ": nothing was decided."
	origins := r.Header.Values("Origin")
	if len(origins) != 1 || !strings.EqualFold(origins[0], "http://"+r.Host) {
		h.fail(w, p, http.StatusForbidden, "Refused", "The request did not come from this page (Origin "+visibleString(strings.Join(origins, ", "), false)+")"+nothing)
		return
	}
	if site := r.Header.Values("Sec-Fetch-Site"); len(site) > 1 || (len(site) == 1 && site[0] != "same-origin") {
		h.fail(w, p, http.StatusForbidden, "Refused", "The request did not come from this page (Sec-Fetch-Site "+visibleString(strings.Join(site, ", "), false)+")"+nothing)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
		h.fail(w, p, http.StatusUnsupportedMediaType, "Refused", "The request is not a form of this page"+nothing)
		return
	}
	if r.ContentLength > MaxBodyBytes {
		h.fail(w, p, http.StatusRequestEntityTooLarge, "Refused", "The form is too large"+nothing)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	if err := r.ParseForm(); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			h.fail(w, p, http.StatusRequestEntityTooLarge, "Refused", "The form is too large"+nothing)
			return
		}
		h.fail(w, p, http.StatusBadRequest, "Bad request", "The form could not be read"+nothing)
		return
	}
	f := r.PostForm
	one := func(name string, optional bool) (string, bool) {
		v := f[name]
		if len(v) == 0 && optional {
			return "", true
		}
		if len(v) != 1 {
			return "", false
		}
		return v[0], true
	}
	session := h.session(r)
	token, ok := one("csrf", false)
	if !ok || session == "" || !hmac.Equal([]byte(token), []byte(h.token(session))) {
		h.fail(w, p, http.StatusForbidden, "Refused", "The form is stale or did not come from this page (CSRF check failed)"+nothing+" Reload the page and decide again.")
		return
	}
	task, ok1 := one("task", false)
	seqText, ok2 := one("seq", false)
	action, ok3 := one("action", false)
	reason, ok4 := one("reason", true)
	name, ok5 := one("name", true)
	seq, err := strconv.ParseInt(seqText, 10, 64)
	switch {
	case !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || task == "" || err != nil || seq < 1 || (action != "approve" && action != "deny"):
		h.fail(w, p, http.StatusBadRequest, "Bad request", "The form is incomplete or malformed"+nothing)
		return
	case len(reason) > maxReasonBytes || len(name) > maxNameBytes:
		h.fail(w, p, http.StatusBadRequest, "Bad request", "The reason or the name is too long"+nothing)
		return
	}
	by := h.by
	if n := cleanName(name); n != "" {
		by += ":" + n
	}
	d := governance.TaskDecision{Allow: action == "approve", DecidedBy: by, Reason: visibleString(strings.TrimSpace(reason), false)}
	if d.Reason == "" {
		d.Reason = "denied on the approvals page"
		if d.Allow {
			d.Reason = "approved on the approvals page"
		}
	}
	if err := h.gate.Decide(r.Context(), task, seq, d); err != nil {
		msg := visibleString(err.Error(), false)
		switch {
		case errors.Is(err, governance.ErrAlreadyDecided):
			h.fail(w, p, http.StatusConflict, "Already decided", "Not recorded: the call was already decided, and the first decision stands. ("+msg+")")
		case errors.Is(err, governance.ErrNotPending):
			h.fail(w, p, http.StatusConflict, "Not pending", "Not recorded: the call is not waiting for a decision. ("+msg+")")
		case errors.Is(err, governance.ErrTaskUnknown):
			h.fail(w, p, http.StatusNotFound, "Unknown task", "Not recorded: there is no such task. ("+msg+")")
		case errors.Is(err, governance.ErrTampered):
			h.fail(w, p, http.StatusInternalServerError, "Store failed verification", "Not recorded: the task's records in the store are damaged. ("+msg+")")
		default:
			h.storeFailed(w, p, err)
		}
		return
	}
	p.Title, p.Status = "Decision recorded", http.StatusOK
	p.Result = &resultView{TaskID: task, Task: visible(task, false), Seq: seq, Allowed: d.Allow, DecidedBy: visible(by, false), Reason: visible(d.Reason, false)}
	h.render(w, p)
}

// cleanName keeps the letters, digits and ._@- of a name typed in the form, at most maxNameRunes of them.
func cleanName(s string) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == maxNameRunes {
			break
		}
		if r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("._@-", r)) {
			b.WriteRune(r)
			n++
		}
	}
	return b.String()
}

// session returns the browser's session cookie, or "" if it has none (or a malformed one).
func (h *handler) session(r *http.Request) string {
	c, err := r.Cookie(h.cookie)
	if err != nil {
		return ""
	}
	if b, err := base64.RawURLEncoding.DecodeString(c.Value); err != nil || len(b) != 32 {
		return ""
	}
	return c.Value
}

// token is the CSRF token of a session.
func (h *handler) token(session string) string {
	m := hmac.New(sha256.New, h.secret)
	m.Write([]byte("wasmbox approvals CSRF v1\x00"))
	m.Write([]byte(session))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (h *handler) storeFailed(w http.ResponseWriter, p *pageData, err error) {
	h.fail(w, p, http.StatusServiceUnavailable, "Store unreachable",
		"The governance store could not be reached, so nothing was decided. Reload the page to check before deciding again. ("+visibleString(err.Error(), false)+")")
}

func (h *handler) fail(w http.ResponseWriter, p *pageData, status int, title, msg string) {
	p.Title, p.Status, p.Message, p.Calls, p.Result = title, status, msg, nil, nil
	h.render(w, p)
}

func (h *handler) render(w http.ResponseWriter, p *pageData) {
	var b bytes.Buffer
	if err := page.Execute(&b, p); err != nil {
		// Only a bug in the template can fail it; say so without the half-written page.
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = fmt.Fprintln(w, "approvals: rendering the page failed")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(p.Status)
	_, _ = w.Write(b.Bytes())
}

// The page. The segments of escaped text are written without whitespace between them; the newline after <pre>
// is the one the HTML parser drops, so that a value that starts with a newline keeps it.
var page = template.Must(template.New("page").Parse(`{{define "segs"}}{{range .}}{{if .Esc}}<span class="esc">{{.Text}}</span>{{else}}{{.Text}}{{end}}{{end}}{{end}}<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} · wasmbox</title>
<style nonce="{{.Nonce}}">
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #111; background: #fff; }
code, pre { font-family: ui-monospace, monospace; }
.call { border: 1px solid #999; border-radius: 6px; padding: 0 1em 1em; margin: 1em 0; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .2em 1em; }
dt { font-weight: bold; }
dd { margin: 0; overflow-wrap: anywhere; }
pre.args { white-space: pre-wrap; overflow-wrap: anywhere; max-height: 70vh; overflow: auto; background: #f4f4f4; border: 1px solid #ccc; padding: .5em; }
.esc { background: #ffe08a; color: #8a0000; border: 1px solid #c00; border-radius: 3px; font-weight: bold; }
.warn { background: #fff0f0; border: 2px solid #c00; padding: .5em; font-weight: bold; }
.more { background: #fff7d6; border: 1px solid #b80; padding: .5em; }
button { font-size: 1em; padding: .3em 1.2em; margin-right: .5em; }
button.approve { background: #d7f5d7; }
button.deny { background: #f9d6d6; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
{{- if .Message}}
<p id="message" data-status="{{.Status}}">{{.Message}}</p>
<p><a href="/">Back to the pending calls</a></p>
{{- else if .Result}}
<p id="result" data-task="{{.Result.TaskID}}" data-seq="{{.Result.Seq}}" data-allowed="{{.Result.Allowed}}">Recorded: call {{.Result.Seq}} of task <code>{{template "segs" .Result.Task}}</code> was <strong>{{if .Result.Allowed}}approved{{else}}denied{{end}}</strong> by <code>{{template "segs" .Result.DecidedBy}}</code> ({{template "segs" .Result.Reason}}).</p>
<p><a href="/">Back to the pending calls</a></p>
{{- else}}
<p>{{len .Calls}} call(s) wait for a decision. Arguments are shown in full, exactly as the tool will receive them;
characters that could hide or disguise text are shown as <span class="esc">⟦U+XXXX⟧</span> (bytes that are not UTF-8 as <span class="esc">⟦0xNN⟧</span>).</p>
{{- if .More}}
<p class="more" id="more">More calls wait than this page shows (at most {{len .Calls}} here): decide these, then reload.</p>
{{- end}}
{{- range .Calls}}
<section class="call" data-task="{{.TaskID}}" data-seq="{{.Seq}}">
<h2>Task <code>{{template "segs" .Task}}</code>, call {{.Seq}}</h2>
<dl>
<dt>Tool</dt><dd><code class="tool">{{template "segs" .Tool}}</code></dd>
<dt>Effect</dt><dd>{{.Effect}}</dd>
<dt>Cost</dt><dd>{{.Cost}}</dd>
<dt>Why</dt><dd class="reason">{{template "segs" .Reason}}</dd>
<dt>Waiting since</dt><dd>{{.Since}}</dd>
</dl>
{{- if .OutcomeUnknown}}
<p class="warn">Outcome unknown: the process that started this call ended before its result was recorded; it may have taken effect. Approving runs it again (with the same idempotency key); denying fails it.</p>
{{- end}}
<p>Arguments ({{.ArgsBytes}} bytes, shown in full{{if .ArgsNote}}; {{.ArgsNote}}{{end}}):</p>
<pre class="args" data-task="{{.TaskID}}" data-seq="{{.Seq}}">
{{template "segs" .Args}}</pre>
<form method="post" action="/decide">
<input type="hidden" name="csrf" value="{{$.CSRF}}">
<input type="hidden" name="task" value="{{.TaskID}}">
<input type="hidden" name="seq" value="{{.Seq}}">
<label>Reason (optional) <input type="text" name="reason" maxlength="1000" size="40"></label>
<label>Your name (optional) <input type="text" name="name" maxlength="64" size="16"></label>
<p><button type="submit" name="action" value="approve" class="approve" data-task="{{.TaskID}}" data-seq="{{.Seq}}">Approve</button><button type="submit" name="action" value="deny" class="deny" data-task="{{.TaskID}}" data-seq="{{.Seq}}">Deny</button></p>
</form>
</section>
{{- end}}
{{- end}}
</body>
</html>
`))
