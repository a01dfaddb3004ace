package escalate

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"sync"
	"time"
)

// The run socket (RunDir/tools.sock): line-delimited JSON, one response line per request line, protocol version
// 1. Requests carry {"v": 1, "id": n, "op": ...}; responses {"id": n, "ok": true, "result": ...} or
// {"id": n, "ok": false, "error": {"type": ..., "message": ...}}. Ops:
//
//	call    {"tool": name, "args": {...}}                   a tool call, served by Job.Tools
//	file    {"path", "mode", "append", "data": base64}      a chunk of a changed workspace file (bootstrap)
//	delete  {"path"}                                        a workspace file was deleted (bootstrap)
//	done    {}                                              the workspace transfer is complete (bootstrap)
//
// Everything on this socket comes from inside the container and is untrusted: every size, count and wait the
// container chooses is bounded (see the package documentation's table and the constants below), paths are
// checked, and the files are compared with what was copied in.
const (
	protocolVersion = 1
	maxLineBytes    = 4 << 20  // a request line (tool arguments, a 768 KiB file chunk in base64)
	maxResultBytes  = 16 << 20 // a tool result
	maxConns        = 16       // concurrent connections per run

	// A connection that sends no request for idleTimeout is closed without an answer (no request was read, so
	// the client may reconnect and send it again); once a request line has started it must be complete within
	// lineTimeout, and each response must be taken by the peer within lineTimeout.
	idleTimeout = 60 * time.Second
	lineTimeout = 10 * time.Second

	// opsChunk: the file-op budget of a run allows one op per opsChunk bytes of FilesOutBytes on top of two per
	// file and one per input file (see runServer.maxOps).
	opsChunk = 64 << 10
)

type request struct {
	V      int             `json:"v"`
	ID     int64           `json:"id"`
	Op     string          `json:"op"`
	Tool   string          `json:"tool,omitempty"`
	Args   json.RawMessage `json:"args,omitempty"`
	Path   string          `json:"path,omitempty"`
	Mode   int             `json:"mode,omitempty"`
	Append bool            `json:"append,omitempty"`
	Data   []byte          `json:"data,omitempty"` // base64 in JSON
}

type response struct {
	ID     int64           `json:"id"`
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *wireError      `json:"error,omitempty"`
}

type wireError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// serverLimits are the bounds of one run's socket that depend on the job.
type serverLimits struct {
	outBytes int64 // bytes of changed files kept, data and paths (Limits.FilesOutBytes)
	outFiles int   // entries kept, files and deletions (Limits.FilesOutCount)
}

// runServer serves one run's socket.
type runServer struct {
	ctx    context.Context
	ln     net.Listener
	tools  ToolHandler
	in     map[string][]byte // the input files: only their deletion is recorded
	maxOut int64
	maxN   int
	maxOps int
	// onFail is called once, outside the lock, when the container goes past a bound that ends the job.
	onFail func(error)
	// idle and line are idleTimeout and lineTimeout (shorter in tests).
	idle, line time.Duration

	wg sync.WaitGroup

	mu        sync.Mutex
	conns     map[net.Conn]struct{}
	files     map[string][]byte
	deleted   map[string]bool
	outBytes  int64 // data and path bytes counted against maxOut
	ops       int   // file, delete and done ops, refused ones included
	done      bool
	closed    bool // close began: a connection accepted from now on is closed at once
	truncated bool
	failErr   error // why the job was ended (wraps ErrSocketLimit), if it was
}

// newRunServer returns a server for one run with input files in (which it does not modify); serve starts it.
func newRunServer(ctx context.Context, tools ToolHandler, in map[string][]byte, lim serverLimits) *runServer {
	s := &runServer{ctx: ctx, tools: tools, in: in, maxOut: lim.outBytes, maxN: lim.outFiles,
		idle: idleTimeout, line: lineTimeout, conns: map[net.Conn]struct{}{},
		files: map[string][]byte{}, deleted: map[string]bool{}}
	if s.maxN <= 0 {
		s.maxN = DefaultFilesOutCount
	}
	// Enough for every file in one op plus one follow-up, every input file deleted, the bytes in 64 KiB chunks
	// (the bootstrap sends 768 KiB) and "done": only a flood gets past it.
	s.maxOps = 2*s.maxN + len(in) + int(max(s.maxOut, 0)/opsChunk) + 16
	return s
}

// serve accepts connections on ln until close.
func (s *runServer) serve(ln net.Listener) {
	s.ln = ln
	s.wg.Add(1)
	go s.accept()
}

// err returns the error that ended the job (wrapping ErrSocketLimit), or nil.
func (s *runServer) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failErr
}

// failLocked records the first job-ending violation; the caller calls the returned function after unlocking.
func (s *runServer) failLocked(err error) func() {
	if s.failErr != nil {
		return func() {}
	}
	s.failErr = err
	s.truncated = true
	return func() {
		if s.onFail != nil {
			s.onFail(err)
		}
	}
}

func (s *runServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed { // accepted while close ran: close's sweep has passed, so close it here
			s.mu.Unlock()
			c.Close()
			return
		}
		if len(s.conns) >= maxConns {
			s.mu.Unlock()
			// One answer (a few bytes: it fits the socket buffer; the deadline covers a peer that never reads).
			c.SetWriteDeadline(time.Now().Add(s.line))
			writeResponse(bufio.NewWriter(c), response{Error: &wireError{"LimitExceeded",
				fmt.Sprintf("too many connections to the tool socket (at most %d at a time)", maxConns)}})
			c.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve1(c)
	}
}

// close stops the server, closes every connection and waits for the handlers.
func (s *runServer) close() {
	s.ln.Close()
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// fileState is a connection's file being received.
type fileState struct {
	path string
	data []byte
}

func (s *runServer) serve1(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	r := bufio.NewReaderSize(c, 64<<10)
	w := bufio.NewWriter(c)
	var cur *fileState
	for {
		// Waiting for a request: a peer that sends nothing is dropped after s.idle, without an answer.
		c.SetReadDeadline(time.Now().Add(s.idle))
		if _, err := r.Peek(1); err != nil {
			return // a partial file (cur) is dropped: the transfer did not finish
		}
		// A request has started: the whole line within s.line, so a slow sender cannot hold a connection.
		c.SetReadDeadline(time.Now().Add(s.line))
		line, err := readLine(r, maxLineBytes)
		if err != nil {
			var ne net.Error
			switch {
			case errors.Is(err, errLineTooLong):
				s.reply(c, w, response{Error: &wireError{"ProtocolError", fmt.Sprintf("request line too long (more than %d bytes)", maxLineBytes)}})
			case errors.As(err, &ne) && ne.Timeout():
				s.reply(c, w, response{Error: &wireError{"ProtocolError", fmt.Sprintf("request line not complete within %s", s.line)}})
			}
			return
		}
		c.SetReadDeadline(time.Time{})
		var resp response
		resp, cur = s.handle(line, cur)
		if err := s.reply(c, w, resp); err != nil {
			return
		}
	}
}

// reply writes one response; a peer that does not take it within s.line loses the connection.
func (s *runServer) reply(c net.Conn, w *bufio.Writer, resp response) error {
	c.SetWriteDeadline(time.Now().Add(s.line))
	return writeResponse(w, resp)
}

// handle answers one request line; cur is the connection's file being received.
func (s *runServer) handle(line []byte, cur *fileState) (response, *fileState) {
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return response{Error: &wireError{"ProtocolError", "request is not valid JSON"}}, cur
	}
	resp := response{ID: req.ID}
	if req.V != protocolVersion {
		resp.Error = &wireError{"ProtocolError", fmt.Sprintf("protocol version %d not supported (want %d)", req.V, protocolVersion)}
		return resp, cur
	}
	switch req.Op {
	case "call":
		resp.Result, resp.Error = s.call(req)
	case "file", "delete", "done":
		cur, resp.Error = s.fileOp(cur, req)
	default:
		resp.Error = &wireError{"ProtocolError", fmt.Sprintf("unknown op %q", req.Op)}
	}
	resp.OK = resp.Error == nil
	return resp, cur
}

func writeResponse(w *bufio.Writer, resp response) error {
	b, err := json.Marshal(resp)
	if err != nil {
		b, _ = json.Marshal(response{ID: resp.ID, Error: &wireError{"ToolError", "unencodable response"}})
	}
	w.Write(b)
	w.WriteByte('\n')
	return w.Flush()
}

// call runs one tool call through the handler.
func (s *runServer) call(req request) (result json.RawMessage, werr *wireError) {
	if s.tools == nil {
		return nil, &wireError{"ToolDenied", "no tools are available in this run"}
	}
	if req.Tool == "" {
		return nil, &wireError{"ToolError", "empty tool name"}
	}
	args := req.Args
	if len(bytes.TrimSpace(args)) == 0 || bytes.Equal(bytes.TrimSpace(args), []byte("null")) {
		args = json.RawMessage("{}")
	}
	if t := bytes.TrimSpace(args); t[0] != '{' {
		return nil, &wireError{"ToolError", "arguments must be a JSON object"}
	}
	defer func() {
		if r := recover(); r != nil {
			result, werr = nil, &wireError{"ToolError", fmt.Sprintf("tool %q panicked: %v", req.Tool, r)}
		}
	}()
	out, err := s.tools(s.ctx, req.Tool, args)
	if err != nil {
		var te *ToolError
		if errors.As(err, &te) {
			return nil, &wireError{te.Type, te.Message}
		}
		return nil, &wireError{"ToolError", err.Error()}
	}
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	if len(out) > maxResultBytes {
		return nil, &wireError{"ToolError", fmt.Sprintf("tool %q returned more than %d bytes", req.Tool, maxResultBytes)}
	}
	if !json.Valid(out) {
		return nil, &wireError{"ToolError", fmt.Sprintf("tool %q returned invalid JSON", req.Tool)}
	}
	return out, nil
}

// fileOp handles the workspace transfer ops. A file is committed when the next file starts or at "done".
//
// Bounds: every path by cleanPath (length, depth, name length); the entries kept (files and deletions of input
// files) by maxN and their bytes (data and paths) by maxOut: past either the transfer is cut off, the container
// is told (LimitExceeded) and the Result reports FilesTruncated. The ops of a run by maxOps, refused ones
// included: past it the job is ended (onFail, an error matching ErrSocketLimit).
func (s *runServer) fileOp(cur *fileState, req request) (*fileState, *wireError) {
	s.mu.Lock()
	after := func() {}
	defer func() { s.mu.Unlock(); after() }()
	s.ops++
	if s.ops > s.maxOps {
		if s.failErr == nil {
			after = s.failLocked(fmt.Errorf("%w: more than %d workspace transfer ops", ErrSocketLimit, s.maxOps))
		}
		return nil, &wireError{"LimitExceeded", fmt.Sprintf("more than %d workspace transfer ops: the run is ended", s.maxOps)}
	}
	if s.truncated {
		return nil, &wireError{"LimitExceeded", "the workspace transfer was already cut off"}
	}
	cutOff := func(format string, args ...any) (*fileState, *wireError) {
		s.truncated = true
		return nil, &wireError{"LimitExceeded", fmt.Sprintf(format, args...)}
	}
	commit := func() {
		if cur != nil {
			s.files[cur.path] = cur.data
			delete(s.deleted, cur.path)
		}
	}
	entries := func() int {
		n := len(s.files) + len(s.deleted)
		if cur != nil {
			if _, ok := s.files[cur.path]; !ok {
				n++
			}
		}
		return n
	}
	switch req.Op {
	case "done":
		commit()
		s.done = true
		return nil, nil
	case "delete":
		p, err := cleanPath(req.Path)
		if err != nil {
			return cur, &wireError{"ProtocolError", err.Error()}
		}
		if old, ok := s.files[p]; ok { // sent, then deleted: its bytes no longer count
			s.outBytes -= int64(len(old)) + int64(len(p))
			delete(s.files, p)
		}
		if _, ok := s.in[p]; !ok || s.deleted[p] {
			return cur, nil // not an input file (or already recorded): nothing to report, nothing kept
		}
		if entries() >= s.maxN {
			return cutOff("more than %d changed files", s.maxN)
		}
		if s.outBytes += int64(len(p)); s.outBytes > s.maxOut {
			return cutOff("changed files exceed %d bytes", s.maxOut)
		}
		s.deleted[p] = true
		return cur, nil
	}
	p, err := cleanPath(req.Path)
	if err != nil {
		return cur, &wireError{"ProtocolError", err.Error()}
	}
	if req.Append && (cur == nil || cur.path != p) {
		return cur, &wireError{"ProtocolError", "append to a file that was not started"}
	}
	if req.Append {
		if s.outBytes += int64(len(req.Data)); s.outBytes > s.maxOut {
			return cutOff("changed files exceed %d bytes", s.maxOut)
		}
		cur.data = append(cur.data, req.Data...)
		return cur, nil
	}
	commit()
	cur = nil
	if old, ok := s.files[p]; ok { // sent twice: the last one counts
		s.outBytes -= int64(len(old)) + int64(len(p))
		delete(s.files, p)
	}
	if s.deleted[p] { // deleted, then created again: one entry
		s.outBytes -= int64(len(p))
		delete(s.deleted, p)
	}
	if entries() >= s.maxN {
		return cutOff("more than %d changed files", s.maxN)
	}
	if s.outBytes += int64(len(p)) + int64(len(req.Data)); s.outBytes > s.maxOut {
		return cutOff("changed files exceed %d bytes", s.maxOut)
	}
	return &fileState{path: p, data: append([]byte(nil), req.Data...)}, nil
}

// changes compares what came back with the input files.
func (s *runServer) changes(in map[string][]byte) (files map[string][]byte, changes []FileChange, complete bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	files = map[string][]byte{}
	for _, p := range sortedKeys(s.files) {
		data := s.files[p]
		old, existed := in[p]
		if existed && bytes.Equal(old, data) {
			continue
		}
		kind := "created"
		if existed {
			kind = "modified"
		}
		files[p] = data
		changes = append(changes, FileChange{Path: p, Kind: kind, Size: int64(len(data))})
	}
	for _, p := range sortedKeys(s.deleted) {
		if _, existed := in[p]; existed {
			changes = append(changes, FileChange{Path: p, Kind: "deleted"})
		}
	}
	sortChanges(changes)
	return files, changes, s.done && !s.truncated
}

func sortChanges(c []FileChange) {
	sort.Slice(c, func(i, j int) bool { return c[i].Path < c[j].Path })
}

var errLineTooLong = errors.New("line too long")

// readLine reads one '\n'-terminated line of at most max bytes (without the newline).
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > max+1 {
			return nil, errLineTooLong
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}
