package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeStdio serves one MCP session over newline-delimited JSON-RPC on r and w (the stdio transport) until r
// ends, ctx is done or the session fails. A line that is not one well-formed JSON-RPC message (bad JSON, a NUL
// byte, nesting past encoding/json's depth limit, an id that is not a number or string, a batch, a line over
// MaxRequestBytes) gets a JSON-RPC error answer and the session carries on, as the HTTP transport answers a bad
// request without ending its sessions.
func (s *SandboxServer) ServeStdio(ctx context.Context, r io.Reader, w io.Writer) error {
	err := s.srv.Run(ctx, &lineTransport{r: r, w: w, max: int(s.cfg.MaxRequestBytes)})
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// lineTransport is an sdk.Transport over one reader and writer that survives malformed input.
type lineTransport struct {
	r   io.Reader
	w   io.Writer
	max int
}

func (t *lineTransport) Connect(context.Context) (sdk.Connection, error) {
	c := &lineConn{w: t.w, in: make(chan lineRead), closed: make(chan struct{})}
	go c.readLoop(bufio.NewReaderSize(t.r, 64<<10), t.max)
	return c, nil
}

type lineRead struct {
	msg jsonrpc.Message
	err error
}

type lineConn struct {
	wmu sync.Mutex
	w   io.Writer

	in        chan lineRead
	closed    chan struct{}
	closeOnce sync.Once
}

func (c *lineConn) SessionID() string { return "" }

func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closed:
		return nil, io.EOF
	case r := <-c.in:
		return r.msg, r.err
	}
}

func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("mcp: encoding a message: %w", err)
	}
	return c.writeLine(b)
}

func (c *lineConn) writeLine(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.closed:
		return io.ErrClosedPipe
	default:
	}
	if _, err := c.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("mcp: writing to stdout: %w", err)
	}
	return nil
}

func (c *lineConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}

// readLoop reads lines of at most max bytes, answers the malformed ones itself and hands the others to Read,
// one at a time (a client that sends faster than the server handles waits).
func (c *lineConn) readLoop(br *bufio.Reader, max int) {
	for {
		line, tooLong, err := readLine(br, max)
		var msg jsonrpc.Message
		if tooLong {
			c.answerError(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, fmt.Sprintf("request line over %d bytes (the server's limit)", max))
		} else if line = bytes.TrimSpace(line); len(line) > 0 {
			var id jsonrpc.ID
			var code int
			var why string
			if msg, id, code, why = decodeLine(line); msg == nil {
				c.answerError(id, code, why)
			}
		}
		if msg != nil {
			select {
			case c.in <- lineRead{msg: msg}:
			case <-c.closed:
				return
			}
		}
		if err != nil {
			select {
			case c.in <- lineRead{err: err}:
			case <-c.closed:
			}
			return
		}
	}
}

func (c *lineConn) answerError(id jsonrpc.ID, code int, msg string) {
	b, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: int64(code), Message: msg}})
	if err == nil {
		_ = c.writeLine(b)
	}
}

// readLine returns the next line without its newline; tooLong reports one longer than max, whose bytes are
// discarded up to its end. err is the reader's (io.EOF at the end).
func readLine(br *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		chunk, e := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > max+1 { // +1: the newline
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if e == bufio.ErrBufferFull {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), tooLong, e
	}
}

// decodeLine decodes one JSON-RPC message; when it cannot, it returns the id to answer (when the line has a
// usable one), the JSON-RPC error code and why.
func decodeLine(line []byte) (jsonrpc.Message, jsonrpc.ID, int, string) {
	if bytes.IndexByte(line, 0) >= 0 {
		return nil, jsonrpc.ID{}, jsonrpc.CodeParseError, "parse error: a NUL byte in the request"
	}
	if !json.Valid(line) {
		var err error
		var v any
		if err = json.Unmarshal(line, &v); err == nil {
			err = errors.New("invalid JSON")
		}
		return nil, jsonrpc.ID{}, jsonrpc.CodeParseError, "parse error: " + err.Error()
	}
	if line[0] == '[' {
		return nil, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "batches are not supported; send one message per line"
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err == nil {
		return msg, jsonrpc.ID{}, 0, ""
	}
	var probe struct {
		ID any `json:"id"`
	}
	var id jsonrpc.ID
	if json.Unmarshal(line, &probe) == nil {
		switch probe.ID.(type) {
		case string, float64:
			if v, e := jsonrpc.MakeID(probe.ID); e == nil {
				id = v
			}
		}
	}
	return nil, id, jsonrpc.CodeInvalidRequest, "invalid request: " + err.Error()
}
