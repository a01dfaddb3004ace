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
// Everything on this socket comes from inside the container and is untrusted: lines, tool arguments and file
// bytes are bounded, paths are checked, and the files are compared with what was copied in.
const (
	protocolVersion = 1
	maxLineBytes    = 4 << 20  // a request line (tool arguments, a 768 KiB file chunk in base64)
	maxResultBytes  = 16 << 20 // a tool result
	maxConns        = 16       // concurrent connections per run
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

// runServer serves one run's socket.
type runServer struct {
	ctx    context.Context
	ln     net.Listener
	tools  ToolHandler
	maxOut int64

	wg sync.WaitGroup

	mu        sync.Mutex
	conns     map[net.Conn]struct{}
	files     map[string][]byte
	deleted   map[string]bool
	outBytes  int64
	done      bool
	truncated bool
}

func serveRun(ctx context.Context, ln net.Listener, tools ToolHandler, maxOut int64) *runServer {
	s := &runServer{ctx: ctx, ln: ln, tools: tools, maxOut: maxOut, conns: map[net.Conn]struct{}{},
		files: map[string][]byte{}, deleted: map[string]bool{}}
	s.wg.Add(1)
	go s.accept()
	return s
}

func (s *runServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if len(s.conns) >= maxConns {
			s.mu.Unlock()
			c.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

// close stops the server, closes every connection and waits for the handlers.
func (s *runServer) close() {
	s.ln.Close()
	s.mu.Lock()
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

func (s *runServer) serve(c net.Conn) {
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
		line, err := readLine(r, maxLineBytes)
		if err != nil {
			if errors.Is(err, errLineTooLong) {
				writeResponse(w, response{Error: &wireError{"ProtocolError", "request line too long"}})
			}
			return // a partial file (cur) is dropped: the transfer did not finish
		}
		var resp response
		resp, cur = s.handle(line, cur)
		if err := writeResponse(w, resp); err != nil {
			return
		}
	}
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
func (s *runServer) fileOp(cur *fileState, req request) (*fileState, *wireError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	commit := func() {
		if cur != nil {
			s.files[cur.path] = cur.data
			delete(s.deleted, cur.path)
		}
	}
	if s.truncated {
		return nil, &wireError{"LimitExceeded", "the workspace transfer was already cut off"}
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
		s.deleted[p] = true
		delete(s.files, p)
		return cur, nil
	}
	p, err := cleanPath(req.Path)
	if err != nil {
		return cur, &wireError{"ProtocolError", err.Error()}
	}
	if req.Append && (cur == nil || cur.path != p) {
		return cur, &wireError{"ProtocolError", "append to a file that was not started"}
	}
	s.outBytes += int64(len(req.Data))
	if s.outBytes > s.maxOut {
		s.truncated = true
		return nil, &wireError{"LimitExceeded", fmt.Sprintf("changed files exceed %d bytes", s.maxOut)}
	}
	if req.Append {
		cur.data = append(cur.data, req.Data...)
		return cur, nil
	}
	commit()
	if old, ok := s.files[p]; ok { // sent twice: the last one counts
		s.outBytes -= int64(len(old))
		delete(s.files, p)
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
