package wasmbox

import (
	"bytes"
	"fmt"
	"io"
	"sync"
)

// capture keeps the first limit bytes written to it, counts the rest, and forwards what it keeps to an optional
// stream. Host memory stays bounded whatever the guest writes.
type capture struct {
	mu      sync.Mutex
	limit   int
	buf     bytes.Buffer
	dropped int64
	stream  io.Writer
}

func newCapture(limit int, stream io.Writer) *capture { return &capture{limit: limit, stream: stream} }

// Write never fails: the guest must not see an error for output past the cap (it would raise in print()).
func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := p
	if room := c.limit - c.buf.Len(); len(keep) > room {
		keep = keep[:max(room, 0)]
	}
	c.buf.Write(keep)
	c.dropped += int64(len(p) - len(keep))
	if c.stream != nil && len(keep) > 0 {
		_, _ = c.stream.Write(keep)
	}
	return len(p), nil
}

// result returns the captured text, with a marker when output was dropped.
func (c *capture) result() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped == 0 {
		return c.buf.String(), false
	}
	return c.buf.String() + fmt.Sprintf("\n[wasmbox: output truncated: %d more bytes dropped]\n", c.dropped), true
}

// switchWriter forwards to the current exec's capture: a Session's instance keeps one writer for its lifetime.
type switchWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *switchWriter) set(w io.Writer) {
	s.mu.Lock()
	s.w = w
	s.mu.Unlock()
}

func (s *switchWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	w := s.w
	s.mu.Unlock()
	if w == nil {
		return len(p), nil
	}
	return w.Write(p)
}

// switchReader is the stdin counterpart of switchWriter.
type switchReader struct {
	mu sync.Mutex
	r  io.Reader
}

func (s *switchReader) set(r io.Reader) {
	s.mu.Lock()
	s.r = r
	s.mu.Unlock()
}

func (s *switchReader) Read(p []byte) (int, error) {
	s.mu.Lock()
	r := s.r
	s.mu.Unlock()
	if r == nil {
		return 0, io.EOF
	}
	return r.Read(p)
}
