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
)

// ErrTooManySessions: the server already keeps ServerConfig.MaxSessions sessions.
var ErrTooManySessions = errors.New("mcp: too many sessions")

// ServerConfig bounds what MCP clients get; every zero value is a safe default. The limits of each run
// (time, memory, output, workspace) are the Sandbox's Config.
type ServerConfig struct {
	// MaxSessions is the most MCP sessions with state (a workspace, and an interpreter once python_exec is used)
	// at a time; a call of a session past it fails with ErrTooManySessions. Zero means DefaultMaxSessions.
	MaxSessions int
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
	closed   bool
}

type sessionState struct {
	busy  int           // calls waiting or running; guarded by SandboxServer.mu
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
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	s := &SandboxServer{sb: sb, cfg: cfg, sessions: map[*sdk.ServerSession]*sessionState{}}
	s.srv = sdk.NewServer(&sdk.Implementation{Name: "wasmbox", Version: "1"}, &sdk.ServerOptions{
		Instructions: "A sandboxed Python 3.13 (WebAssembly): no network, no host files, no processes. " +
			"Files in /workspace persist for this session.",
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
	return newOriginPolicy(s.cfg.AllowedOrigins).wrap(h)
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

// state returns the session's state, holding its turn; release with done.
func (s *SandboxServer) state(ctx context.Context, ss *sdk.ServerSession) (st *sessionState, done func(), err error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, nil, errors.New("mcp: server closed")
	}
	st = s.sessions[ss]
	if st == nil {
		if len(s.sessions) >= s.cfg.MaxSessions {
			s.mu.Unlock()
			return nil, nil, fmt.Errorf("%w: %d sessions are open (the server's limit); close one or wait for one to idle out", ErrTooManySessions, s.cfg.MaxSessions)
		}
		st = &sessionState{turn: make(chan struct{}, 1), ws: wasmbox.NewWorkspace(s.cfg.WorkspaceBytes, 0)}
		s.sessions[ss] = st
		st.timer = time.AfterFunc(s.cfg.IdleTimeout, func() { s.dropIdle(ss, st) })
		if ss != nil {
			go func() { _ = ss.Wait(); s.drop(ss, st) }()
		}
	}
	st.busy++ // not idle while a call waits or runs
	s.mu.Unlock()
	release := func() {
		s.mu.Lock()
		st.busy--
		st.timer.Reset(s.cfg.IdleTimeout)
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

// dropIdle ends a session's state after IdleTimeout without calls (the timer fired; a call may have begun since).
func (s *SandboxServer) dropIdle(ss *sdk.ServerSession, st *sessionState) {
	s.mu.Lock()
	busy := st.busy > 0
	s.mu.Unlock()
	if !busy {
		s.drop(ss, st)
	}
}

// drop ends a session's state (its MCP session closed, or it idled out).
func (s *SandboxServer) drop(ss *sdk.ServerSession, st *sessionState) {
	s.mu.Lock()
	if s.sessions[ss] != st {
		s.mu.Unlock()
		return
	}
	delete(s.sessions, ss)
	s.mu.Unlock()
	_ = st.close(context.Background())
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
	st, done, err := s.state(ctx, req.Session)
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
	st, done, err := s.state(ctx, req.Session)
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
	st, done, err := s.state(ctx, req.Session)
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
	st, done, err := s.state(ctx, req.Session)
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
	st, done, err := s.state(ctx, req.Session)
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
