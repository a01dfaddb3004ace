package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wasmbox/wasmbox/wasmbox"
)

// Defaults of [ServerConfig]; each applies when its field is zero.
const (
	DefaultMaxSessions    = 8
	DefaultIdleTimeout    = 15 * time.Minute
	DefaultMaxFileBytes   = 1 << 20
	DefaultMaxListEntries = 1000
	// DefaultMaxRequestBytes bounds one HTTP request body (the code or file a client sends).
	DefaultMaxRequestBytes = 4 << 20
	// DefaultMaxQueuedCalls is how many calls of one session may wait behind the one in progress.
	DefaultMaxQueuedCalls = 4
	// DefaultMaxPendingBytes bounds the input (code, file content) of every call waiting or running, all
	// sessions together, and over HTTP the bodies of the requests being served.
	DefaultMaxPendingBytes = 16 << 20
	// DefaultMaxMCPSessions bounds MCP sessions over HTTP, with state or without.
	DefaultMaxMCPSessions = 64
	// DefaultEvictIdleAfter is how long a session's state must have been idle before a new session may take
	// its place when MaxSessions are open.
	DefaultEvictIdleAfter = time.Minute
)

// ErrTooManySessions: the server already keeps ServerConfig.MaxSessions sessions.
var ErrTooManySessions = errors.New("mcp: too many sessions")

// ServerConfig bounds what MCP clients get; every zero value is a safe default. The limits of each run
// (time, memory, output, workspace) are the Sandbox's Config.
type ServerConfig struct {
	// MaxSessions is the most MCP sessions with state (a workspace, and an interpreter once python_exec is used)
	// at a time. A call of a new session past it takes the place of the state idle the longest, if that has been
	// idle for EvictIdleAfter (its workspace and variables are gone; its next call starts afresh); otherwise it
	// fails with ErrTooManySessions. Zero means DefaultMaxSessions.
	MaxSessions int
	// EvictIdleAfter is how long a session's state must have been idle before a new session may take its place.
	// Zero means DefaultEvictIdleAfter; negative means never (new sessions fail until one idles out).
	EvictIdleAfter time.Duration
	// MaxMCPSessions bounds the MCP sessions of the HTTP transport, those that never called a tool included. A
	// new session past it closes the one seen least recently among those without state (then one whose state
	// may be evicted); when none can go, the request gets 503. Zero means DefaultMaxMCPSessions.
	MaxMCPSessions int
	// MaxQueuedCalls is how many calls of one session may wait behind the one in progress; a call past it fails
	// with ErrBusy at once. Zero means DefaultMaxQueuedCalls; negative means none may wait.
	MaxQueuedCalls int
	// MaxPendingBytes bounds the input bytes of all calls waiting or running (code, paths, file content); a
	// call past it fails with ErrBusy. Over HTTP it also bounds the bodies being read and served (each counted
	// at its Content-Length, or MaxRequestBytes when unknown): a request past it gets 503 before its body is
	// read. Zero means DefaultMaxPendingBytes.
	MaxPendingBytes int64
	// IdleTimeout ends the state of a session (and, over HTTP, the MCP session) after this long without a
	// call. Zero means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxFileBytes bounds a file read or written by the file tools. Zero means DefaultMaxFileBytes.
	MaxFileBytes int
	// MaxListEntries bounds the entries list_files returns. Zero means DefaultMaxListEntries.
	MaxListEntries int
	// MaxRequestBytes bounds one HTTP request body. Zero means DefaultMaxRequestBytes.
	MaxRequestBytes int64
	// WorkspaceBytes is the quota of each session's workspace. Zero means wasmbox.DefaultWorkspaceBytes.
	WorkspaceBytes int64
	// AllowedOrigins are the browser origins ("https://app.example:8443") whose requests the HTTP transport
	// accepts, with CORS headers; see NormalizeOrigin for the form (an entry it refuses matches nothing). A
	// request with any other Origin header gets 403, as the MCP transport specification requires; requests
	// without one (clients that are not browsers) are unaffected. Empty (the default) allows no cross origin.
	AllowedOrigins []string
}

// SandboxServer serves a Sandbox to MCP clients. Each MCP session has its own workspace, shared by run_python,
// python_exec and the file tools, and (once python_exec is used) its own interpreter.
type SandboxServer struct {
	sb  *wasmbox.Sandbox
	cfg ServerConfig
	srv *sdk.Server

	mu       sync.Mutex
	sessions map[*sdk.ServerSession]*sessionState
	seen     map[*sdk.ServerSession]time.Time // last activity of MCP sessions
	watched  map[*sdk.ServerSession]bool      // sessions whose end a goroutine waits for
	pending  int64                            // input bytes of calls waiting or running
	httpBody int64                            // bytes reserved by HTTP requests being served
	closed   bool
}

type sessionState struct {
	busy  int           // calls waiting or running; guarded by SandboxServer.mu
	last  time.Time     // when the last call ended (or the state began); guarded by SandboxServer.mu
	turn  chan struct{} // one token: the call in progress
	ws    *wasmbox.Workspace
	se    *wasmbox.Session
	timer *time.Timer
}

// NewServer returns an MCP server whose tools run code in sb. The caller keeps owning sb; Close ends the
// sessions' interpreters, not sb.
func NewServer(sb *wasmbox.Sandbox, cfg ServerConfig) *SandboxServer {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&cfg.MaxSessions, DefaultMaxSessions)
	def(&cfg.MaxFileBytes, DefaultMaxFileBytes)
	def(&cfg.MaxListEntries, DefaultMaxListEntries)
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	def(&cfg.MaxMCPSessions, DefaultMaxMCPSessions)
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.EvictIdleAfter == 0 {
		cfg.EvictIdleAfter = DefaultEvictIdleAfter
	}
	switch {
	case cfg.MaxQueuedCalls == 0:
		cfg.MaxQueuedCalls = DefaultMaxQueuedCalls
	case cfg.MaxQueuedCalls < 0:
		cfg.MaxQueuedCalls = 0
	}
	if cfg.MaxPendingBytes <= 0 {
		cfg.MaxPendingBytes = DefaultMaxPendingBytes
	}
	s := &SandboxServer{sb: sb, cfg: cfg, sessions: map[*sdk.ServerSession]*sessionState{},
		seen: map[*sdk.ServerSession]time.Time{}, watched: map[*sdk.ServerSession]bool{}}
	s.srv = sdk.NewServer(&sdk.Implementation{Name: "wasmbox", Version: "1"}, &sdk.ServerOptions{
		Instructions: "A sandboxed Python 3.13 (WebAssembly): no network, no host files, no processes. " +
			"Files in /workspace persist for this session.",
		InitializedHandler: func(_ context.Context, req *sdk.InitializedRequest) { s.touch(req.Session) },
	})
	notDestructive := false
	local := &sdk.ToolAnnotations{DestructiveHint: &notDestructive, OpenWorldHint: &notDestructive}
	sdk.AddTool(s.srv, &sdk.Tool{Name: "run_python", Annotations: local, Description: "Run Python 3.13 code in a " +
		"fresh sandboxed interpreter (no network, no host files); /workspace holds this session's files. " +
		"Returns stdout, stderr, the exception if any, and the files the code changed."}, s.runPython)
	sdk.AddTool(s.srv, &sdk.Tool{Name: "python_exec", Annotations: local, Description: "Run Python 3.13 code in " +
		"this session's interpreter: variables, functions and imports persist from one call to the next, like a " +
		"REPL. Same sandbox and output as run_python."}, s.pythonExec)
	sdk.AddTool(s.srv, &sdk.Tool{Name: "read_file", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true},
		Description: "Read a file of this session's workspace (/workspace)."}, s.readFile)
	sdk.AddTool(s.srv, &sdk.Tool{Name: "write_file", Annotations: local,
		Description: "Write a text file into this session's workspace (/workspace), creating parent directories."}, s.writeFile)
	sdk.AddTool(s.srv, &sdk.Tool{Name: "list_files", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true},
		Description: "List the files of this session's workspace (/workspace)."}, s.listFiles)
	return s
}

// MCPServer is the SDK server, to run on any transport (Run(ctx, &sdk.StdioTransport{}) for stdio).
func (s *SandboxServer) MCPServer() *sdk.Server { return s.srv }

// HTTPHandler serves the streamable HTTP transport. It refuses (403) requests whose Origin header is neither
// in AllowedOrigins nor the server's own loopback origin, and requests whose Host is not a loopback name when
// reached on a loopback address (DNS rebinding); it bounds request bodies by MaxRequestBytes and ends idle MCP
// sessions after IdleTimeout.
func (s *SandboxServer) HTTPHandler() http.Handler {
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.srv },
		&sdk.StreamableHTTPOptions{SessionTimeout: s.cfg.IdleTimeout, MaxRequestBodyBytes: s.cfg.MaxRequestBytes})
	return newOriginPolicy(s.cfg.AllowedOrigins).wrap(s.limitHTTP(h))
}

// limitHTTP bounds what HTTP requests can hold: the bytes of the bodies being served (MaxPendingBytes, each
// reserved before it is read) and, for a request that starts a session, the number of MCP sessions.
func (s *SandboxServer) limitHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		n := r.ContentLength
		if n < 0 || n > s.cfg.MaxRequestBytes {
			n = s.cfg.MaxRequestBytes
		}
		s.mu.Lock()
		ok := s.httpBody+n <= s.cfg.MaxPendingBytes
		if ok {
			s.httpBody += n
		}
		s.mu.Unlock()
		if !ok {
			w.Header().Set("Retry-After", "1")
			http.Error(w, fmt.Sprintf("%v: requests in progress hold %d bytes (the server's limit)", ErrBusy, s.cfg.MaxPendingBytes), http.StatusServiceUnavailable)
			return
		}
		defer func() {
			s.mu.Lock()
			s.httpBody -= n
			s.mu.Unlock()
		}()
		r.Body = http.MaxBytesReader(w, r.Body, n)
		if r.Header.Get("Mcp-Session-Id") == "" && !s.makeRoomForSession() {
			w.Header().Set("Retry-After", "10")
			http.Error(w, fmt.Sprintf("%v: %d MCP sessions are open and none can be closed (the server's limit)", ErrTooManySessions, s.cfg.MaxMCPSessions), http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Sessions is the number of sessions with state.
func (s *SandboxServer) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// Close ends every session's state. Later calls fail.
func (s *SandboxServer) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	all := s.sessions
	s.sessions = map[*sdk.ServerSession]*sessionState{}
	s.seen = map[*sdk.ServerSession]time.Time{}
	s.mu.Unlock()
	var errs []error
	for _, st := range all {
		errs = append(errs, st.close(ctx))
	}
	return errors.Join(errs...)
}

func (st *sessionState) close(ctx context.Context) error {
	st.timer.Stop()
	select {
	case st.turn <- struct{}{}: // wait for the call in progress
	case <-ctx.Done():
		return fmt.Errorf("mcp: closing a session: %w", ctx.Err())
	}
	defer func() { <-st.turn }()
	if st.se != nil {
		err := st.se.Close(ctx)
		st.se = nil
		return err
	}
	return nil
}

// ErrBusy: the server already holds as many waiting calls or as many bytes of call input as its limits allow;
// the call was refused without running. Retrying after earlier calls end can succeed.
var ErrBusy = errors.New("mcp: server busy")

// state returns the session's state, holding its turn; release with done. n is the size of the call's input,
// counted against MaxPendingBytes until done.
func (s *SandboxServer) state(ctx context.Context, ss *sdk.ServerSession, n int64) (st *sessionState, done func(), err error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, nil, errors.New("mcp: server closed")
	}
	if s.pending+n > s.cfg.MaxPendingBytes {
		s.mu.Unlock()
		return nil, nil, fmt.Errorf("%w: the calls in progress hold %d bytes of input and this one has %d (the server's limit is %d); retry when they end",
			ErrBusy, s.pending, n, s.cfg.MaxPendingBytes)
	}
	now := time.Now()
	s.seen[ss] = now
	st = s.sessions[ss]
	var evicted *sessionState
	if st == nil {
		if len(s.sessions) >= s.cfg.MaxSessions {
			var key *sdk.ServerSession
			if key, evicted = s.evictableLocked(now); evicted == nil {
				s.mu.Unlock()
				return nil, nil, fmt.Errorf("%w: %d sessions are open (the server's limit) and none has been idle for %v; close one or wait for one to idle out",
					ErrTooManySessions, s.cfg.MaxSessions, s.cfg.EvictIdleAfter)
			}
			delete(s.sessions, key)
			evicted.timer.Stop()
		}
		st = &sessionState{turn: make(chan struct{}, 1), ws: wasmbox.NewWorkspace(s.cfg.WorkspaceBytes, 0), last: now}
		s.sessions[ss] = st
		st.timer = time.AfterFunc(s.cfg.IdleTimeout, func() { s.dropIdle(ss, st) })
		if ss != nil && !s.watched[ss] {
			s.watched[ss] = true
			go func() { _ = ss.Wait(); s.forget(ss) }()
		}
	} else if st.busy > s.cfg.MaxQueuedCalls {
		waiting := st.busy - 1
		s.mu.Unlock()
		return nil, nil, fmt.Errorf("%w: %d calls of this session are already waiting for the one in progress (the server's limit); wait for their results",
			ErrBusy, waiting)
	}
	st.busy++ // not idle while a call waits or runs
	s.pending += n
	s.mu.Unlock()
	if evicted != nil {
		_ = evicted.close(context.WithoutCancel(ctx))
	}
	release := func() {
		s.mu.Lock()
		st.busy--
		s.pending -= n
		st.last = time.Now()
		if st.busy == 0 && s.sessions[ss] == st {
			st.timer.Reset(s.cfg.IdleTimeout)
		}
		s.mu.Unlock()
	}
	select {
	case st.turn <- struct{}{}:
	case <-ctx.Done():
		release()
		return nil, nil, ctx.Err()
	}
	return st, func() { <-st.turn; release() }, nil
}

// evictableLocked returns the session state idle the longest, if it has been idle for EvictIdleAfter and no call
// of it waits or runs. s.mu is held.
func (s *SandboxServer) evictableLocked(now time.Time) (*sdk.ServerSession, *sessionState) {
	if s.cfg.EvictIdleAfter < 0 {
		return nil, nil
	}
	var key *sdk.ServerSession
	var victim *sessionState
	for ss, st := range s.sessions {
		if st.busy == 0 && now.Sub(st.last) >= s.cfg.EvictIdleAfter && (victim == nil || st.last.Before(victim.last)) {
			key, victim = ss, st
		}
	}
	return key, victim
}

// dropIdle ends a session's state after IdleTimeout without calls (the timer fired; a call may have begun since).
func (s *SandboxServer) dropIdle(ss *sdk.ServerSession, st *sessionState) {
	s.mu.Lock()
	if st.busy > 0 || s.sessions[ss] != st {
		s.mu.Unlock()
		return
	}
	delete(s.sessions, ss)
	s.mu.Unlock()
	_ = st.close(context.Background())
}

// forget ends what the server keeps of an MCP session that ended.
func (s *SandboxServer) forget(ss *sdk.ServerSession) {
	s.mu.Lock()
	st := s.sessions[ss]
	delete(s.sessions, ss)
	delete(s.seen, ss)
	delete(s.watched, ss)
	s.mu.Unlock()
	if st != nil {
		_ = st.close(context.Background())
	}
}

// touch records activity of an MCP session (it began, or it called a tool).
func (s *SandboxServer) touch(ss *sdk.ServerSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || ss == nil {
		return
	}
	s.seen[ss] = time.Now()
	if !s.watched[ss] {
		s.watched[ss] = true
		go func() { _ = ss.Wait(); s.forget(ss) }()
	}
}

// makeRoomForSession makes room for one more MCP session when MaxMCPSessions are connected: it closes the one
// seen least recently among those without state (a session that never called a tool is the first to go), else
// the state idle the longest past EvictIdleAfter. It reports whether there is room.
func (s *SandboxServer) makeRoomForSession() bool {
	s.mu.Lock()
	n := 0
	var victim *sdk.ServerSession
	var victimSeen time.Time
	for ss := range s.srv.Sessions() {
		n++
		if s.sessions[ss] != nil {
			continue
		}
		if seen := s.seen[ss]; victim == nil || seen.Before(victimSeen) {
			victim, victimSeen = ss, seen
		}
	}
	if n < s.cfg.MaxMCPSessions {
		s.mu.Unlock()
		return true
	}
	var evicted *sessionState
	if victim == nil {
		victim, evicted = s.evictableLocked(time.Now())
		if evicted == nil {
			s.mu.Unlock()
			return false
		}
		delete(s.sessions, victim)
		evicted.timer.Stop()
	}
	delete(s.seen, victim)
	s.mu.Unlock()
	if evicted != nil {
		_ = evicted.close(context.Background())
	}
	_ = victim.Close()
	return true
}

// CodeIn is the input of run_python and python_exec.
type CodeIn struct {
	Code string `json:"code" jsonschema:"the Python source to run"`
}

// RunOut is what run_python and python_exec return.
type RunOut struct {
	Stdout          string               `json:"stdout"`
	Stderr          string               `json:"stderr"`
	StdoutTruncated bool                 `json:"stdout_truncated,omitempty"`
	StderrTruncated bool                 `json:"stderr_truncated,omitempty"`
	ExitCode        int                  `json:"exit_code"`
	Exception       *wasmbox.PythonError `json:"exception,omitempty"`
	// Error is set when the run did not end normally (timeout, memory limit, a broken session).
	Error        string               `json:"error,omitempty"`
	FilesChanged []wasmbox.FileChange `json:"files_changed"`
	DurationMS   int64                `json:"duration_ms"`
}

func runOut(res *wasmbox.Result, err error) RunOut {
	out := RunOut{Stdout: res.Stdout, Stderr: res.Stderr, StdoutTruncated: res.StdoutTruncated,
		StderrTruncated: res.StderrTruncated, ExitCode: res.ExitCode, Exception: res.Exception,
		FilesChanged: res.FilesChanged, DurationMS: res.Duration.Milliseconds()}
	if out.FilesChanged == nil {
		out.FilesChanged = []wasmbox.FileChange{}
	}
	if err != nil {
		out.Error = err.Error()
	}
	return out
}

func (s *SandboxServer) runPython(ctx context.Context, req *sdk.CallToolRequest, in CodeIn) (*sdk.CallToolResult, RunOut, error) {
	st, done, err := s.state(ctx, req.Session, int64(len(in.Code)))
	if err != nil {
		return nil, RunOut{}, err
	}
	defer done()
	res, err := s.sb.RunProgram(ctx, wasmbox.Program{Code: in.Code, Workspace: st.ws})
	if res == nil {
		return nil, RunOut{}, err
	}
	return nil, runOut(res, err), nil
}

func (s *SandboxServer) pythonExec(ctx context.Context, req *sdk.CallToolRequest, in CodeIn) (*sdk.CallToolResult, RunOut, error) {
	st, done, err := s.state(ctx, req.Session, int64(len(in.Code)))
	if err != nil {
		return nil, RunOut{}, err
	}
	defer done()
	if st.se == nil || !st.se.Alive() {
		if st.se != nil {
			_ = st.se.Close(ctx)
		}
		if st.se, err = s.sb.NewSession(ctx, st.ws); err != nil {
			st.se = nil
			return nil, RunOut{}, err
		}
	}
	res, err := st.se.Exec(ctx, in.Code)
	if res == nil {
		return nil, RunOut{}, err
	}
	out := runOut(res, err)
	if !st.se.Alive() {
		out.Error += " (the session's interpreter ended; the next call starts a new one, the workspace stays)"
	}
	return nil, out, nil
}

// PathIn names a workspace file.
type PathIn struct {
	Path string `json:"path" jsonschema:"the file's path, relative to /workspace"`
}

// FileOut is a file's content: text when it is UTF-8.
type FileOut struct {
	Path    string `json:"path"`
	Size    int    `json:"size"`
	Content string `json:"content,omitempty"`
	// Binary is set for a file that is not UTF-8 text; its content is not returned.
	Binary bool `json:"binary,omitempty"`
}

func (s *SandboxServer) readFile(ctx context.Context, req *sdk.CallToolRequest, in PathIn) (*sdk.CallToolResult, FileOut, error) {
	st, done, err := s.state(ctx, req.Session, int64(len(in.Path)))
	if err != nil {
		return nil, FileOut{}, err
	}
	defer done()
	for _, f := range st.ws.Files() {
		if f.Path == cleanRel(in.Path) && f.Size > int64(s.cfg.MaxFileBytes) {
			return nil, FileOut{}, fmt.Errorf("mcp: %s has %d bytes; read_file returns at most %d", in.Path, f.Size, s.cfg.MaxFileBytes)
		}
	}
	b, err := st.ws.ReadFile(in.Path)
	if err != nil {
		return nil, FileOut{}, err
	}
	if len(b) > s.cfg.MaxFileBytes {
		return nil, FileOut{}, fmt.Errorf("mcp: %s has %d bytes; read_file returns at most %d", in.Path, len(b), s.cfg.MaxFileBytes)
	}
	out := FileOut{Path: in.Path, Size: len(b)}
	if utf8.Valid(b) {
		out.Content = string(b)
	} else {
		out.Binary = true
	}
	return nil, out, nil
}

func cleanRel(p string) string {
	for len(p) > 0 && p[0] == '/' {
		p = p[1:]
	}
	if len(p) > len("workspace/") && p[:len("workspace/")] == "workspace/" {
		p = p[len("workspace/"):]
	}
	return p
}

// WriteIn is the input of write_file.
type WriteIn struct {
	Path    string `json:"path" jsonschema:"the file's path, relative to /workspace"`
	Content string `json:"content" jsonschema:"the file's text"`
}

// WriteOut says what write_file wrote.
type WriteOut struct {
	Path string `json:"path"`
	Size int    `json:"size"`
}

func (s *SandboxServer) writeFile(ctx context.Context, req *sdk.CallToolRequest, in WriteIn) (*sdk.CallToolResult, WriteOut, error) {
	if len(in.Content) > s.cfg.MaxFileBytes {
		return nil, WriteOut{}, fmt.Errorf("mcp: content of %d bytes; write_file takes at most %d", len(in.Content), s.cfg.MaxFileBytes)
	}
	st, done, err := s.state(ctx, req.Session, int64(len(in.Path)+len(in.Content)))
	if err != nil {
		return nil, WriteOut{}, err
	}
	defer done()
	if err := st.ws.WriteFile(in.Path, []byte(in.Content)); err != nil {
		return nil, WriteOut{}, err
	}
	return nil, WriteOut{Path: in.Path, Size: len(in.Content)}, nil
}

// ListOut lists workspace files.
type ListOut struct {
	Files []FileEntry `json:"files"`
	// Total counts every entry; Files holds at most ServerConfig.MaxListEntries of them.
	Total int `json:"total"`
}

// FileEntry is one entry of list_files.
type FileEntry struct {
	Path  string `json:"path"`
	Size  int64  `json:"size"`
	IsDir bool   `json:"is_dir,omitempty"`
}

func (s *SandboxServer) listFiles(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, ListOut, error) {
	st, done, err := s.state(ctx, req.Session, 0)
	if err != nil {
		return nil, ListOut{}, err
	}
	defer done()
	all := st.ws.Files()
	out := ListOut{Files: []FileEntry{}, Total: len(all)}
	for i, f := range all {
		if i == s.cfg.MaxListEntries {
			break
		}
		out.Files = append(out.Files, FileEntry{Path: f.Path, Size: f.Size, IsDir: f.IsDir()})
	}
	return nil, out, nil
}
