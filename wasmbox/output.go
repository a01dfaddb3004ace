package wasmbox

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
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

// stdinChunk is the most the host reads from a program's Stdin at once.
const stdinChunk = 64 << 10

// switchReader is the guest's standard input: the current exec's stdinPump, or end of file between execs.
type switchReader struct {
	mu sync.Mutex
	p  *stdinPump
}

// set makes p the guest's stdin (nil: end of file), stopping the previous one.
func (s *switchReader) set(p *stdinPump) {
	s.mu.Lock()
	old := s.p
	s.p = p
	s.mu.Unlock()
	if old != nil {
		old.close()
	}
}

func (s *switchReader) current() *stdinPump {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p
}

func (s *switchReader) Read(b []byte) (int, error) {
	p := s.current()
	if p == nil {
		return 0, io.EOF
	}
	return p.read(b)
}

// Poll reports whether a read would not block (wazero's poll_oneoff and select() on stdin use it). A negative
// timeout waits until data, end of file or the end of the run.
func (s *switchReader) Poll(flag experimentalsys.Pflag, timeoutMillis int32) (bool, experimentalsys.Errno) {
	if flag != experimentalsys.POLLIN {
		return false, experimentalsys.ENOTSUP
	}
	p := s.current()
	if p == nil {
		return true, 0
	}
	return p.poll(timeoutMillis), 0
}

// stdinPump reads one exec's Program.Stdin on a goroutine of its own, one request at a time, so that a read of
// the guest waits for data or for the end of the run, never for a Reader that does not return. After the run the
// goroutine lives on until the caller's Reader returns from the Read it is in (if any), then exits; what that
// last Read returns is dropped. At most StdinLimit bytes are read per run; past them, and after the run's
// context ended, the program sees end of file.
type stdinPump struct {
	ctx         context.Context
	left        int64 // bytes that may still be read from the caller
	req         chan int
	resp        chan stdinRead
	stop        chan struct{}
	stopOnce    sync.Once
	outstanding bool
	buf         []byte // read, not yet consumed
	err         error  // sticky: io.EOF or the Reader's error
	onCut       func() // called when the run's end cuts a wait short
}

type stdinRead struct {
	b   []byte
	err error
}

func newStdinPump(ctx context.Context, r io.Reader, limit int64, onCut func()) *stdinPump {
	p := &stdinPump{ctx: ctx, left: limit, req: make(chan int, 1), resp: make(chan stdinRead, 1),
		stop: make(chan struct{}), onCut: onCut}
	go p.loop(r)
	return p
}

func (p *stdinPump) loop(r io.Reader) {
	for {
		select {
		case n := <-p.req:
			b := make([]byte, n)
			k, err := safeRead(r, b)
			p.resp <- stdinRead{b[:k], err} // buffered: one request at a time
		case <-p.stop:
			return
		}
	}
}

func safeRead(r io.Reader, b []byte) (n int, err error) {
	defer func() {
		if v := recover(); v != nil {
			n, err = 0, fmt.Errorf("wasmbox: stdin reader panicked: %v", v)
		}
	}()
	n, err = r.Read(b)
	if n < 0 || n > len(b) {
		return 0, fmt.Errorf("wasmbox: stdin reader returned %d for a %d-byte buffer", n, len(b))
	}
	return n, err
}

func (p *stdinPump) close() { p.stopOnce.Do(func() { close(p.stop) }) }

// fill waits (until wait fires, forever if wait is nil) for data or the end of input; false means wait fired.
func (p *stdinPump) fill(wait <-chan time.Time) bool {
	if len(p.buf) > 0 || p.err != nil {
		return true
	}
	if p.ctx.Err() != nil {
		p.err = io.EOF
		return true
	}
	if !p.outstanding {
		if p.left <= 0 {
			p.err = io.EOF
			return true
		}
		p.req <- int(min(stdinChunk, p.left))
		p.outstanding = true
	}
	select {
	case r := <-p.resp:
		p.outstanding = false
		p.buf = r.b
		p.left -= int64(len(r.b))
		if r.err != nil {
			p.err = r.err
		}
		return true
	case <-p.ctx.Done():
		p.err = io.EOF
		if p.onCut != nil {
			p.onCut()
		}
		return true
	case <-wait:
		return false
	}
}

func (p *stdinPump) read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	// A Reader may return (0, nil); a bounded number of those in a row is end of file.
	for range 100 {
		p.fill(nil)
		if len(p.buf) > 0 {
			n := copy(b, p.buf)
			p.buf = p.buf[n:]
			return n, nil
		}
		if p.err != nil {
			return 0, p.err
		}
	}
	p.err = io.EOF
	return 0, io.EOF
}

func (p *stdinPump) poll(timeoutMillis int32) bool {
	var wait <-chan time.Time
	if timeoutMillis >= 0 {
		t := time.NewTimer(time.Duration(timeoutMillis) * time.Millisecond)
		defer t.Stop()
		wait = t.C
	}
	for range 100 {
		if !p.fill(wait) {
			return false
		}
		if len(p.buf) > 0 || p.err != nil {
			return true
		}
	}
	p.err = io.EOF
	return true
}
