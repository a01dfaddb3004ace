package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/internal/termsafe"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// Defaults of [Config]; each applies when its field is zero.
const (
	DefaultCallTimeout         = 30 * time.Second
	DefaultConnectTimeout      = 30 * time.Second
	DefaultMaxTools            = 512
	DefaultMaxSchemaBytes      = 64 << 10
	DefaultMaxResultBytes      = 1 << 20
	DefaultMaxNameBytes        = 128
	DefaultMaxDescriptionBytes = 8 << 10
	DefaultMaxRestarts         = 3
	// maxIdentBytes is the longest Python name made from a tool's name (before a collision suffix).
	maxIdentBytes = 64
	// maxListPages bounds the pages of tools/list, whatever cursors the server sends.
	maxListPages = 100
	// maxErrorBytes bounds the text of an error result kept in a ToolError.
	maxErrorBytes = 4 << 10
	// maxStderrBytes is how much of a stdio server's stderr is kept (its end) to explain a failed start or a
	// crash.
	maxStderrBytes = 2 << 10
	// waitDelay bounds how long closing a stdio server waits for its stderr pipe to reach EOF after the server
	// itself ended (a descendant may hold it open).
	waitDelay = 2 * time.Second
	// maxFrameBytes bounds one message from the server: the SDK's own limit for stdio lines and SSE events, and
	// ours for the JSON bodies of streamable HTTP (which the SDK reads whole).
	maxFrameBytes = sdk.DefaultMaxLineLength
)

// limitTransport bounds every HTTP response body that is not an event stream (whose events the SDK bounds).
type limitTransport struct {
	rt  http.RoundTripper
	max int64
}

func (l limitTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.rt.RoundTrip(r)
	if err != nil || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, err
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, left: l.max}
	return resp, nil
}

// errBodyTooLarge: an HTTP response of the server passed maxFrameBytes.
var errBodyTooLarge = fmt.Errorf("%w: an HTTP response of the server is larger than %d bytes", ErrBound, maxFrameBytes)

type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errBodyTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// Sentinel errors. Errors of this package wrap one of them and name the server.
var (
	// ErrConnect: the server could not be started or did not complete the MCP handshake in time.
	ErrConnect = errors.New("mcp: cannot connect to the server")
	// ErrServerDead: the server's process or connection ended and could not be restarted (or has used up
	// Config.MaxRestarts).
	ErrServerDead = errors.New("mcp: server is not running")
	// ErrToolError: the server answered the call with an error result (isError) or a protocol error.
	ErrToolError = errors.New("mcp: tool error")
	// ErrBound: the server sent more than a bound of Config allows (tools, schema, result, name).
	ErrBound = errors.New("mcp: server exceeded a bound")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("mcp: client closed")
)

// Server says how to reach one MCP server: exactly one of Command, URL or Transport.
type Server struct {
	// Name names the server in errors and tool descriptions; default: the command's base name or the URL's host.
	Name string
	// Command is the argv of a server that speaks MCP on its standard input and output (the stdio transport).
	// The process is not sandboxed by wasmbox: it runs with this process's rights (see the package doc).
	Command []string
	// Env adds to the minimal environment of Command (see [BaseEnv]): "NAME" passes this process's value of
	// NAME (if it has one), "NAME=value" sets it. Nothing else of this process's environment reaches the server.
	Env []string
	// Dir is the working directory of Command; "" means this process's.
	Dir string
	// URL is the endpoint of a streamable HTTP server.
	URL string
	// HTTPClient is used for URL; nil means a client without a timeout of its own (calls are bounded by
	// Config.CallTimeout).
	HTTPClient *http.Client
	// Transport is any other transport of the Go SDK (an in-memory one in tests). It cannot be restarted: each
	// Connect of a Transport may be called once.
	Transport sdk.Transport
}

// name is the server's name for messages and spans, escaped for a terminal.
func (s Server) name() string { return termsafe.Clean(s.rawName()) }

func (s Server) rawName() string {
	switch {
	case s.Name != "":
		return s.Name
	case len(s.Command) > 0:
		c := baseName(s.Command[0])
		if c == "npx" || c == "npx.cmd" {
			if pkg := npxPackage(s.Command[1:]); pkg != "" {
				return pkg
			}
		}
		return c
	case s.URL != "":
		return s.URL
	}
	return "mcp"
}

func baseName(c string) string {
	if i := strings.LastIndexAny(c, `/\`); i >= 0 {
		c = c[i+1:]
	}
	return c
}

// npxPackage is the package an npx command line runs, scope/name without a version: the value of
// --package/-p if given, else the first argument that is not an option.
func npxPackage(args []string) string {
	pkg := ""
	for i := 0; i < len(args) && pkg == ""; i++ {
		a := args[i]
		switch {
		case a == "--package" || a == "-p":
			if i+1 < len(args) {
				pkg = args[i+1]
			}
		case strings.HasPrefix(a, "--package="):
			pkg = strings.TrimPrefix(a, "--package=")
		case a == "--":
		case strings.HasPrefix(a, "-"):
		default:
			pkg = a
		}
	}
	// "@scope/name@1.2.3" -> "@scope/name", "name@latest" -> "name".
	if i := strings.LastIndexByte(pkg, '@'); i > 0 {
		pkg = pkg[:i]
	}
	return pkg
}

// Config bounds what a server may choose; every zero value is a safe default.
type Config struct {
	// CallTimeout bounds one tool call (the run's deadline bounds it too); zero means DefaultCallTimeout.
	CallTimeout time.Duration
	// ConnectTimeout bounds the start of the server and the handshake and tool listing; zero means
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// MaxTools is the most tools a server may list; a server listing more fails Connect (ErrBound). Zero means
	// DefaultMaxTools.
	MaxTools int
	// MaxSchemaBytes bounds the JSON of one tool's input (and output) schema; a tool with a larger one is
	// skipped (Client.Skipped). Zero means DefaultMaxSchemaBytes.
	MaxSchemaBytes int
	// MaxResultBytes bounds the JSON a call returns to the program; a larger result is a ToolError. Zero means
	// DefaultMaxResultBytes.
	MaxResultBytes int
	// MaxNameBytes bounds a tool's name; a tool with a longer one is skipped. Zero means DefaultMaxNameBytes.
	MaxNameBytes int
	// MaxDescriptionBytes: longer descriptions are cut. Zero means DefaultMaxDescriptionBytes.
	MaxDescriptionBytes int
	// MaxRestarts is how many times a server whose process or connection ended is started again (on the next
	// call after it ended; the call that saw it end fails). Zero means DefaultMaxRestarts; negative means never.
	MaxRestarts int
	// Prefix, if set, is put before every tool's Python name ("gh" makes gh_search), to tell servers apart.
	Prefix string
	// TrustAnnotations makes a tool's effect what the server's annotations claim ([EffectOf]). Without it
	// (the default) every tool of the server is unspecified, which the gate treats as irreversible: it needs
	// approval unless a policy marks it, and the hints are only shown in the tool's description. Set it only
	// for a server you control: a third-party server can mark any tool read-only.
	TrustAnnotations bool
}

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	def(&c.MaxTools, DefaultMaxTools)
	def(&c.MaxSchemaBytes, DefaultMaxSchemaBytes)
	def(&c.MaxResultBytes, DefaultMaxResultBytes)
	def(&c.MaxNameBytes, DefaultMaxNameBytes)
	def(&c.MaxDescriptionBytes, DefaultMaxDescriptionBytes)
	if c.MaxRestarts == 0 {
		c.MaxRestarts = DefaultMaxRestarts
	}
	return c
}

// Client is a connection to one MCP server whose tools become sandbox tools. It is safe for concurrent use.
// Its life should be its Sandbox's: [Attach] makes it so.
type Client struct {
	srv   Server
	cfg   Config
	sdk   *sdk.Client
	name  string
	tools []hostfuncs.Tool
	skip  []string

	mu       sync.Mutex
	stderr   *tailBuffer // the last bytes a stdio server wrote to its stderr
	session  *sdk.ClientSession
	procs    map[*sdk.ClientSession]*exec.Cmd // the process behind each live stdio session
	restarts int
	closed   bool
	lastErr  error
}

// Connect starts (or reaches) the server, completes the MCP handshake and lists its tools, within
// Config.ConnectTimeout.
func Connect(ctx context.Context, srv Server, cfg Config) (*Client, error) {
	n := 0
	for _, set := range []bool{len(srv.Command) > 0, srv.URL != "", srv.Transport != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, fmt.Errorf("%w %q: give exactly one of Command, URL or Transport", ErrConnect, srv.name())
	}
	c := &Client{srv: srv, cfg: cfg.withDefaults(), name: srv.name()}
	c.sdk = sdk.NewClient(&sdk.Implementation{Name: "wasmbox", Version: "1"}, nil)
	cctx, cancel := context.WithTimeout(ctx, c.cfg.ConnectTimeout)
	defer cancel()
	if err := c.start(cctx); err != nil {
		return nil, err
	}
	tools, err := c.list(cctx)
	if err != nil {
		c.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	c.build(tools)
	return c, nil
}

// start connects a new session; the caller holds mu or owns c.
func (c *Client) start(ctx context.Context) error {
	var t sdk.Transport
	var tb *tailBuffer
	var cmd *exec.Cmd
	var pt *procTransport
	switch {
	case len(c.srv.Command) > 0:
		cmd = exec.Command(c.srv.Command[0], c.srv.Command[1:]...)
		cmd.Env, cmd.Dir = serverEnv(os.Environ(), c.srv.Env), c.srv.Dir
		tb = &tailBuffer{max: maxStderrBytes}
		cmd.Stderr, c.stderr = tb, tb
		ownGroup(cmd)
		// A descendant that inherited stderr keeps the pipe open after the server ends; Wait gives up on it
		// after this, so closing never hangs on it (killGroup then ends it).
		cmd.WaitDelay = waitDelay
		pt = &procTransport{Transport: &sdk.CommandTransport{Command: cmd, TerminateDuration: time.Second}, cmd: cmd}
		t = pt
	case c.srv.URL != "":
		hc := &http.Client{}
		if c.srv.HTTPClient != nil {
			*hc = *c.srv.HTTPClient
		}
		rt := hc.Transport
		if rt == nil {
			rt = http.DefaultTransport
		}
		hc.Transport = limitTransport{rt: rt, max: maxFrameBytes}
		t = &sdk.StreamableClientTransport{Endpoint: c.srv.URL, HTTPClient: hc, MaxRetries: -1, MaxEventSize: maxFrameBytes}
	default:
		t = c.srv.Transport
	}
	// The SDK's Connect may block on a server that never answers; ctx bounds it.
	type res struct {
		s   *sdk.ClientSession
		err error
	}
	ch := make(chan res, 1)
	go func() {
		s, err := c.sdk.Connect(ctx, t, nil)
		ch <- res{s, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			killGroup(cmd) // the SDK has closed the pipes; whatever the server started goes too
			return fmt.Errorf("%w %q: %w%s", ErrConnect, c.name, cleanErr{r.err}, tailOf(tb))
		}
		c.session = r.s
		if cmd != nil {
			if c.procs == nil {
				c.procs = map[*sdk.ClientSession]*exec.Cmd{}
			}
			c.procs[r.s] = cmd
		}
		return nil
	case <-ctx.Done():
		// Kill the server now: a server stalled in its handshake must not outlive the caller's wait (nor this
		// process). The SDK's Connect then fails on the closed pipes; its session, if any, is closed too.
		pt.abandon()
		go func() {
			if r := <-ch; r.s != nil {
				r.s.Close()
			}
			killGroup(cmd)
		}()
		return fmt.Errorf("%w %q: the handshake did not finish: %w%s", ErrConnect, c.name, ctx.Err(), tailOf(tb))
	}
}

// procTransport is a stdio server's transport that knows when its process has started, so that a caller who
// stopped waiting can kill it without racing the start.
type procTransport struct {
	sdk.Transport
	cmd       *exec.Cmd
	mu        sync.Mutex
	started   bool // cmd.Process is set
	abandoned bool // the caller stopped waiting: kill the process as soon as it exists
}

func (p *procTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	conn, err := p.Transport.Connect(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.started = p.cmd.Process != nil
	if p.abandoned {
		killGroup(p.cmd)
	}
	return conn, err
}

// abandon kills the server's process group now if it started, or as soon as it does. A nil p does nothing.
func (p *procTransport) abandon() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.abandoned = true
	if p.started {
		killGroup(p.cmd)
	}
}

// closeSession closes s and then kills whatever its server process left behind.
func (c *Client) closeSession(s *sdk.ClientSession) error {
	c.mu.Lock()
	cmd := c.procs[s]
	delete(c.procs, s)
	c.mu.Unlock()
	var seen []int
	if cmd != nil && cmd.Process != nil {
		// While the server runs its descendants are its children; once it ended they are no longer.
		seen = descendants(cmd.Process.Pid)
	}
	err := s.Close()
	killGroup(cmd, seen...)
	return err
}

// list reads the server's tools, bounded in count and pages.
func (c *Client) list(ctx context.Context) ([]*sdk.Tool, error) {
	var out []*sdk.Tool
	params := &sdk.ListToolsParams{}
	for page := 0; ; page++ {
		if page == maxListPages {
			return nil, fmt.Errorf("%w: server %q: tools/list sent more than %d pages", ErrBound, c.name, maxListPages)
		}
		r, err := c.session.ListTools(ctx, params)
		if err != nil {
			return nil, fmt.Errorf("%w %q: tools/list: %w", ErrConnect, c.name, cleanErr{err})
		}
		out = append(out, r.Tools...)
		if len(out) > c.cfg.MaxTools {
			return nil, fmt.Errorf("%w: server %q lists more than %d tools (Config.MaxTools)", ErrBound, c.name, c.cfg.MaxTools)
		}
		if r.NextCursor == "" {
			return out, nil
		}
		params = &sdk.ListToolsParams{Cursor: r.NextCursor}
	}
}

// build turns the listed tools into sandbox tools: names become unique Python identifiers (in the order of
// the servers' names, so the result does not depend on the listing order), schemas are bounded, annotations
// become effects.
func (c *Client) build(list []*sdk.Tool) {
	sort.SliceStable(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	seen := map[string]bool{}
	var ok []*sdk.Tool
	var tools []hostfuncs.Tool
	for _, t := range list {
		if t == nil {
			continue
		}
		if len(t.Name) > c.cfg.MaxNameBytes || t.Name == "" {
			c.skip = append(c.skip, fmt.Sprintf("a tool with a name of %d bytes (Config.MaxNameBytes is %d)", len(t.Name), c.cfg.MaxNameBytes))
			continue
		}
		if seen[t.Name] {
			c.skip = append(c.skip, fmt.Sprintf("%q: listed twice", t.Name))
			continue
		}
		seen[t.Name] = true
		tool, err := c.tool(t)
		if err != nil {
			c.skip = append(c.skip, fmt.Sprintf("%q: %v", t.Name, termsafe.Clean(cutText(err.Error(), 512))))
			continue
		}
		ok, tools = append(ok, t), append(tools, tool)
	}
	// Names that are already identifiers keep them; the others get the next free suffix, in name order.
	used := map[string]bool{}
	exact := make([]bool, len(ok))
	for i, t := range ok {
		id := Identifier(c.cfg.Prefix, t.Name)
		if (c.cfg.Prefix == "" && id == t.Name || c.cfg.Prefix != "" && id == c.cfg.Prefix+"_"+t.Name) && !used[id] {
			exact[i], used[id], tools[i].Name = true, true, id
		}
	}
	for i, t := range ok {
		if !exact[i] {
			tools[i].Name = uniqueName(Identifier(c.cfg.Prefix, t.Name), used)
		}
	}
	c.tools = tools
}

// Tools returns the server's tools as sandbox tools (register them, or use [Attach]).
func (c *Client) Tools() []hostfuncs.Tool { return append([]hostfuncs.Tool(nil), c.tools...) }

// Skipped describes the tools of the server that were left out, and why (a name or schema past a bound, a
// schema hostfuncs cannot use).
func (c *Client) Skipped() []string { return append([]string(nil), c.skip...) }

// Name is the server's name.
func (c *Client) Name() string { return c.name }

// Close ends the session and stops the server's process (stdin closed, then SIGTERM after a second, then
// SIGKILL). It is safe to call more than once.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	s := c.session
	c.session, c.closed = nil, true
	c.mu.Unlock()
	if s == nil {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- c.closeSession(s) }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if errors.As(err, &exit) || errors.Is(err, os.ErrProcessDone) {
			// The process ended, with a code or by the signal Close sent it, or before the signal (the SDK
			// signals when a descendant still holds the server's stderr open).
			return nil
		}
		if err != nil && !errors.Is(err, sdk.ErrConnectionClosed) {
			return fmt.Errorf("mcp: closing %q: %w", c.name, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("mcp: closing %q: %w", c.name, ctx.Err())
	}
}

// live returns a usable session, restarting a server that ended (within MaxRestarts).
func (c *Client) live(ctx context.Context) (*sdk.ClientSession, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("%w: %q", ErrClosed, c.name)
	}
	if c.session != nil {
		return c.session, nil
	}
	if c.srv.Transport != nil || c.cfg.MaxRestarts < 0 || c.restarts >= c.cfg.MaxRestarts {
		return nil, fmt.Errorf("%w: %q ended (%v) and is not restarted (restarts: %d)", ErrServerDead, c.name, c.lastErr, c.restarts)
	}
	c.restarts++
	cctx, cancel := context.WithTimeout(ctx, c.cfg.ConnectTimeout)
	defer cancel()
	if err := c.start(cctx); err != nil {
		c.lastErr = err
		return nil, fmt.Errorf("%w: restarting %q: %w", ErrServerDead, c.name, err)
	}
	return c.session, nil
}

// dead drops s after its connection ended.
func (c *Client) dead(s *sdk.ClientSession, err error) {
	c.mu.Lock()
	if c.session == s {
		c.session, c.lastErr = nil, err
	}
	c.mu.Unlock()
	go c.closeSession(s)
}

// Restarts is how many times the server was started again after it ended.
func (c *Client) Restarts() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.restarts
}

// call runs the tool name on the server and converts its result.
func (c *Client) call(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	s, err := c.live(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	defer cancel()
	var a map[string]any
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, fmt.Errorf("mcp: %s: %w", name, err)
	}
	type res struct {
		r   *sdk.CallToolResult
		err error
	}
	ch := make(chan res, 1)
	go func() {
		r, err := s.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: a})
		ch <- res{r, err}
	}()
	var r res
	select {
	case r = <-ch:
	case <-ctx.Done(): // the SDK returns on cancellation too; this holds even if a transport does not
		r.err = ctx.Err()
	}
	if r.err != nil {
		shown := termsafe.Clean(name)
		switch {
		case errors.Is(ctx.Err(), context.Canceled):
			return nil, fmt.Errorf("%w: %s on %q: the call was cancelled: %w", ErrToolError, shown, c.name, ctx.Err())
		case ctx.Err() != nil:
			return nil, fmt.Errorf("%w: %s on %q: no answer in time: %w", ErrToolError, shown, c.name, ctx.Err())
		case connectionLost(r.err):
			c.mu.Lock()
			tb := c.stderr
			c.mu.Unlock()
			c.dead(s, r.err)
			return nil, fmt.Errorf("%w: %q ended during the call to %s: %w%s", ErrServerDead, c.name, shown, cleanErr{r.err}, tailOf(tb))
		}
		return nil, fmt.Errorf("%w: %s on %q: %s", ErrToolError, shown, c.name, cutText(r.err.Error(), maxErrorBytes))
	}
	return c.result(name, r.r)
}

// connectionLost classifies a failed call: an error response of the server (a JSON-RPC error) is an answer, the
// session goes on; the SDK's ErrConnectionClosed, or the end of the stream that the SDK hands every call in
// flight when its reader stops (io.EOF and kin), means the connection is gone.
func connectionLost(err error) bool {
	var wire *jsonrpc.Error
	if errors.As(err, &wire) {
		return false
	}
	return errors.Is(err, sdk.ErrConnectionClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, io.ErrClosedPipe) || errors.Is(err, os.ErrClosed) || errors.Is(err, syscall.EPIPE)
}

// cleanErr is err with its text escaped for a terminal (a server chose part of it); errors.Is and As see err.
type cleanErr struct{ err error }

func (e cleanErr) Error() string { return termsafe.Clean(e.err.Error()) }
func (e cleanErr) Unwrap() error { return e.err }

// result converts a CallToolResult to the JSON the program gets: structuredContent as it is (a dict or list),
// a single text content as a str, several contents as a list of str (text) and descriptions (other kinds).
func (c *Client) result(name string, r *sdk.CallToolResult) (json.RawMessage, error) {
	if r == nil {
		return json.RawMessage("null"), nil
	}
	if r.IsError {
		var texts []string
		for _, ct := range r.Content {
			if t, ok := ct.(*sdk.TextContent); ok {
				texts = append(texts, t.Text)
			}
		}
		msg := strings.Join(texts, "\n")
		if msg == "" {
			msg = "the tool reported an error"
		}
		return nil, fmt.Errorf("%w: %s: %s", ErrToolError, termsafe.Clean(name), cutText(msg, maxErrorBytes))
	}
	var v any
	if r.StructuredContent != nil {
		v = r.StructuredContent
	} else {
		items := make([]any, 0, len(r.Content))
		for _, ct := range r.Content {
			items = append(items, describe(ct))
		}
		switch len(items) {
		case 0:
			v = nil
		case 1:
			v = items[0]
		default:
			v = items
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: result: %w", ErrToolError, termsafe.Clean(name), err)
	}
	if len(b) > c.cfg.MaxResultBytes {
		return nil, fmt.Errorf("%w: %s on %q returned %d bytes (Config.MaxResultBytes is %d)", ErrBound, termsafe.Clean(name), c.name, len(b), c.cfg.MaxResultBytes)
	}
	return b, nil
}

// describe is the Python value of one content: a str for text, a dict describing anything else (its bytes stay
// on the host).
func describe(ct sdk.Content) any {
	switch t := ct.(type) {
	case *sdk.TextContent:
		return t.Text
	case *sdk.ImageContent:
		return map[string]any{"type": "image", "mime_type": t.MIMEType, "size": decodedSize(t.Data)}
	case *sdk.AudioContent:
		return map[string]any{"type": "audio", "mime_type": t.MIMEType, "size": decodedSize(t.Data)}
	case *sdk.ResourceLink:
		d := map[string]any{"type": "resource_link", "uri": cutText(t.URI, 1024), "name": cutText(t.Name, 256), "mime_type": t.MIMEType}
		if t.Size != nil {
			d["size"] = *t.Size
		}
		return d
	case *sdk.EmbeddedResource:
		d := map[string]any{"type": "resource"}
		if t.Resource != nil {
			d["uri"], d["mime_type"] = cutText(t.Resource.URI, 1024), t.Resource.MIMEType
			if t.Resource.Blob != nil {
				d["size"] = len(t.Resource.Blob)
			} else {
				d["text"] = t.Resource.Text // bounded with the whole result
			}
		}
		return d
	}
	b, _ := json.Marshal(ct)
	var w struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(b, &w)
	return map[string]any{"type": w.Type, "size": len(b)}
}

// decodedSize is the size of data (the SDK decoded the wire's base64).
func decodedSize(data []byte) int { return len(data) }

// tool makes the sandbox tool for t (without its Python name).
func (c *Client) tool(t *sdk.Tool) (hostfuncs.Tool, error) {
	in, err := json.Marshal(t.InputSchema)
	if err != nil {
		return hostfuncs.Tool{}, fmt.Errorf("input schema: %w", err)
	}
	if len(in) > c.cfg.MaxSchemaBytes {
		return hostfuncs.Tool{}, fmt.Errorf("input schema of %d bytes (Config.MaxSchemaBytes is %d)", len(in), c.cfg.MaxSchemaBytes)
	}
	if string(in) == "null" {
		in = nil
	}
	schema, rename, err := pythonParams(in)
	if err != nil {
		return hostfuncs.Tool{}, err
	}
	var out json.RawMessage
	if t.OutputSchema != nil {
		if b, err := json.Marshal(t.OutputSchema); err == nil && len(b) <= c.cfg.MaxSchemaBytes {
			out = b
		}
	}
	desc := t.Description
	if desc == "" && t.Title != "" {
		desc = t.Title
	}
	desc = cutText(strings.TrimSpace(desc), c.cfg.MaxDescriptionBytes)
	if desc == "" {
		desc = "Tool " + t.Name + "."
	}
	desc += fmt.Sprintf("\n\n(MCP tool %q of server %q.", t.Name, c.name)
	effect := governance.EffectUnspecified
	if c.cfg.TrustAnnotations {
		effect = EffectOf(t.Annotations)
	} else if h := hints(t.Annotations); h != "" {
		desc += " The server describes it as " + h + "; unchecked, so it needs approval unless a policy marks it."
	}
	desc += ")"
	name := t.Name
	tool := hostfuncs.Tool{Description: desc, Parameters: schema, Result: out, Effect: effect}
	tool.Handler = func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
		if len(rename) > 0 {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(args, &m); err != nil {
				return nil, err
			}
			r := make(map[string]json.RawMessage, len(m))
			for k, v := range m {
				if orig, ok := rename[k]; ok {
					k = orig
				}
				r[k] = v
			}
			if args, err = json.Marshal(r); err != nil {
				return nil, err
			}
		}
		return c.call(ctx, name, args)
	}
	// Check now that hostfuncs accepts the schema, so that one odd tool is skipped instead of failing Register.
	probe := tool
	probe.Name = "probe"
	if err := hostfuncs.NewRegistry().Register(probe); err != nil {
		return hostfuncs.Tool{}, err
	}
	return tool, nil
}

// EffectOf maps MCP tool annotations to a governance effect, as a Client does with Config.TrustAnnotations:
// openWorldHint (true or, as the MCP specification defaults it, absent) → Irreversible, since the tool
// reaches beyond the server (the web, other systems); otherwise readOnlyHint → ReadOnly; destructiveHint (true
// or absent) → Irreversible; destructiveHint false → Mutating; no annotations → EffectUnspecified (treated as
// Irreversible). Annotations are the server's claims: a policy's tool effect can only make a call stricter.
func EffectOf(a *sdk.ToolAnnotations) governance.Effect {
	switch {
	case a == nil:
		return governance.EffectUnspecified
	case a.OpenWorldHint == nil || *a.OpenWorldHint:
		return governance.Irreversible
	case a.ReadOnlyHint:
		return governance.ReadOnly
	case a.DestructiveHint != nil && !*a.DestructiveHint:
		return governance.Mutating
	}
	return governance.Irreversible
}

// hints describes the annotations a server gave a tool ("read-only, closed world"), or "".
func hints(a *sdk.ToolAnnotations) string {
	if a == nil {
		return ""
	}
	var h []string
	if a.ReadOnlyHint {
		h = append(h, "read-only")
	} else if a.DestructiveHint != nil && !*a.DestructiveHint {
		h = append(h, "not destructive")
	}
	if a.OpenWorldHint != nil {
		if *a.OpenWorldHint {
			h = append(h, "open world")
		} else {
			h = append(h, "closed world")
		}
	}
	return strings.Join(h, ", ")
}

// BaseEnv lists what a stdio server gets of this process's environment by default: PATH, HOME, the locale
// (LANG, LANGUAGE, LC_*), TMPDIR, on Windows the variables a process needs to start (SystemRoot, PATHEXT,
// TEMP...), and the npm settings an npx launcher needs to find its cache and work offline
// (npm_config_cache, npm_config_offline, npm_config_prefer_offline, npm_config_userconfig, npm_config_prefix,
// in either case). Nothing else reaches the server (API keys, tokens, cloud credentials) unless Server.Env
// names it.
var BaseEnv = []string{"PATH", "HOME", "LANG", "LANGUAGE", "LC_*", "TMPDIR",
	"SystemRoot", "SYSTEMROOT", "windir", "ComSpec", "PATHEXT", "TEMP", "TMP", "USERPROFILE", "APPDATA", "LOCALAPPDATA",
	"npm_config_cache", "npm_config_offline", "npm_config_prefer_offline", "npm_config_userconfig", "npm_config_prefix",
	"NPM_CONFIG_CACHE", "NPM_CONFIG_OFFLINE", "NPM_CONFIG_PREFER_OFFLINE", "NPM_CONFIG_USERCONFIG", "NPM_CONFIG_PREFIX"}

// serverEnv is the environment of a stdio server: the variables of parent that BaseEnv names, then extra
// ("NAME" copies NAME from parent, "NAME=value" sets it; a later entry wins).
func serverEnv(parent, extra []string) []string {
	vals := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	lookup := func(name string) (string, bool) {
		for i := len(parent) - 1; i >= 0; i-- {
			if k, v, ok := strings.Cut(parent[i], "="); ok && k == name {
				return v, true
			}
		}
		return "", false
	}
	for _, kv := range parent {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		for _, pat := range BaseEnv {
			if k == pat || strings.HasSuffix(pat, "*") && strings.HasPrefix(k, strings.TrimSuffix(pat, "*")) {
				set(k, v)
				break
			}
		}
	}
	for _, e := range extra {
		if k, v, ok := strings.Cut(e, "="); ok {
			if k != "" {
				set(k, v)
			}
		} else if v, ok := lookup(e); ok {
			set(e, v)
		}
	}
	env := make([]string, 0, len(order))
	for _, k := range order {
		env = append(env, k+"="+vals[k])
	}
	return env
}

// pythonParams rewrites the top-level property names of an object schema that are not usable Python
// identifiers; rename maps a new name back to the server's.
func pythonParams(schema json.RawMessage) (json.RawMessage, map[string]string, error) {
	if len(schema) == 0 {
		return nil, nil, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(schema, &top); err != nil {
		return nil, nil, fmt.Errorf("input schema must be a JSON object: %w", err)
	}
	props, ok := top["properties"]
	if !ok {
		return schema, nil, nil
	}
	var names []string
	dec := json.NewDecoder(bytes.NewReader(props))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, errors.New("input schema: properties must be an object")
	}
	values := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("input schema: %w", err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, fmt.Errorf("input schema: %w", err)
		}
		k := tok.(string)
		if _, dup := values[k]; dup {
			return nil, nil, fmt.Errorf("input schema: property %q twice", k)
		}
		names = append(names, k)
		values[k] = v
	}
	used := map[string]bool{}
	newName := map[string]string{}
	var rename map[string]string
	for _, n := range names {
		if Identifier("", n) == n {
			used[n] = true
		}
	}
	for _, n := range names {
		if used[n] && Identifier("", n) == n {
			newName[n] = n
			continue
		}
		p := uniqueName(Identifier("", n), used)
		newName[n] = p
		if rename == nil {
			rename = map[string]string{}
		}
		rename[p] = n
	}
	if rename == nil {
		return schema, nil, nil
	}
	// Rebuild properties in the server's order, and required with the new names.
	var b bytes.Buffer
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(newName[n])
		b.Write(k)
		b.WriteByte(':')
		b.Write(values[n])
	}
	b.WriteByte('}')
	top["properties"] = b.Bytes()
	if req, ok := top["required"]; ok {
		var rs []string
		if err := json.Unmarshal(req, &rs); err != nil {
			return nil, nil, fmt.Errorf("input schema: required: %w", err)
		}
		for i, r := range rs {
			if nn, ok := newName[r]; ok {
				rs[i] = nn
			}
		}
		top["required"], _ = json.Marshal(rs)
	}
	out, err := json.Marshal(top) // key order of the top level does not matter; properties keep theirs
	return out, rename, err
}

// pythonKeywords and the generated module's own names cannot be tool or parameter names.
var reservedNames = map[string]bool{"False": true, "None": true, "True": true, "and": true, "as": true,
	"assert": true, "async": true, "await": true, "break": true, "class": true, "continue": true, "def": true,
	"del": true, "elif": true, "else": true, "except": true, "finally": true, "for": true, "from": true,
	"global": true, "if": true, "import": true, "in": true, "is": true, "lambda": true, "nonlocal": true,
	"not": true, "or": true, "pass": true, "raise": true, "return": true, "try": true, "while": true,
	"with": true, "yield": true, "list_tools": true, "call": true, "help": true, "ToolException": true,
	"ToolDenied": true, "ApprovalDenied": true, "ApprovalTimeout": true, "BudgetExceeded": true,
	"ToolLimitExceeded": true, "ToolError": true, "InvalidToolArguments": true, "UnknownTool": true,
	"final_answer": true}

// Identifier makes a Python identifier of an MCP name: prefix_ then the name with every character that is not
// an ASCII letter, digit or underscore replaced by '_', leading underscores dropped, "t_" before a leading
// digit (or for an empty name), "_" after a reserved word (keywords, the tools module's own names), at most 64
// bytes. It does not make names unique: a Client adds _2, _3... in the order of the servers' names.
func Identifier(prefix, name string) string {
	var b strings.Builder
	if prefix != "" {
		b.WriteString(prefix)
		b.WriteByte('_')
	}
	for _, r := range name {
		switch {
		case r < utf8.RuneSelf && (r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := strings.TrimLeft(b.String(), "_")
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		s = "t_" + s
	}
	if len(s) > maxIdentBytes {
		s = s[:maxIdentBytes]
	}
	if reservedNames[s] {
		s += "_"
	}
	return s
}

// uniqueName returns base, or base_2, base_3... the first not in used, and marks it used.
func uniqueName(base string, used map[string]bool) string {
	name := base
	for i := 2; used[name] || reservedNames[name]; i++ {
		name = base + "_" + strconv.Itoa(i)
	}
	used[name] = true
	return name
}

func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// Attach registers the tools of every client in cfg.Tools (a new Registry when it is nil; names already there
// get the next free suffix) and adds the clients to cfg.Closers, so that the Sandbox made from cfg owns them:
// its Close stops the servers. Use the same cfg for wasmbox.New or agent.New.
func Attach(cfg *wasmbox.Config, clients ...*Client) error {
	if cfg.Tools == nil {
		cfg.Tools = hostfuncs.NewRegistry()
	}
	used := map[string]bool{}
	for _, n := range cfg.Tools.Names() {
		used[n] = true
	}
	for _, c := range clients {
		for _, t := range c.Tools() {
			if used[t.Name] {
				t.Name = uniqueName(t.Name, used)
			}
			used[t.Name] = true
			if err := cfg.Tools.Register(t); err != nil {
				return fmt.Errorf("mcp: server %q: %w", c.name, err)
			}
		}
		cfg.Closers = append(cfg.Closers, c)
	}
	return nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) > t.max {
		p = p[len(p)-t.max:]
	}
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return n, nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// tailOf is "; server stderr: ..." with the end of a stdio server's stderr, or "".
func tailOf(tb *tailBuffer) string {
	if tb == nil {
		return ""
	}
	time.Sleep(20 * time.Millisecond) // let the last lines of a process that just ended arrive
	s := strings.TrimSpace(termsafe.Lines(tb.String()))
	if s == "" {
		return ""
	}
	return "; server stderr: " + s
}
