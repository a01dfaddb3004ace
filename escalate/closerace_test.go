package escalate

import (
	"net"
	"sync"
	"testing"
	"time"
)

// lateListener's Accept hands over one connection only once Close has been called and the test says so: the
// connection close() could miss, accepted while it swept the open ones.
type lateListener struct {
	closed  chan struct{}
	release chan struct{}
	conn    net.Conn
	once    sync.Once
	gave    bool
}

func (l *lateListener) Accept() (net.Conn, error) {
	if !l.gave {
		<-l.closed
		<-l.release
		l.gave = true
		return l.conn, nil
	}
	return nil, net.ErrClosed
}
func (l *lateListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *lateListener) Addr() net.Addr { return &net.UnixAddr{Name: "late", Net: "unix"} }

// TestCloseClosesALateConnection: a connection accepted while close ran used to be added after close's sweep,
// so its handler (and close, waiting for it) stayed until the peer hung up.
func TestCloseClosesALateConnection(t *testing.T) {
	server, peer := net.Pipe()
	defer peer.Close()
	ln := &lateListener{closed: make(chan struct{}), release: make(chan struct{}), conn: server}
	s := newRunServer(t.Context(), nil, nil, serverLimits{outBytes: 1 << 20})
	s.idle, s.line = time.Hour, time.Hour // only close may end the connection
	s.serve(ln)
	done := make(chan struct{})
	go func() { s.close(); close(done) }()
	<-ln.closed
	// close has closed the listener; let it sweep (it holds no connection yet), then hand the connection over.
	for {
		s.mu.Lock()
		swept := s.closed
		s.mu.Unlock()
		if swept {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(ln.release)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("close did not return: the late connection was kept open")
	}
	peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := peer.Read(make([]byte, 1)); err == nil {
		t.Error("the late connection is still open")
	}
}

// TestSocketAppendBytesCounted: appended chunks count against the bytes of changed files like the first one:
// up to the limit exactly, and not a byte past it (mutation testing removed the append's charge unnoticed).
func TestSocketAppendBytesCounted(t *testing.T) {
	s := newRunServer(t.Context(), nil, nil, serverLimits{outBytes: 100})
	var cur *fileState
	if resp := send(s, &cur, map[string]any{"op": "file", "path": "a", "data": make([]byte, 40)}); !resp.OK { // 1 + 40
		t.Fatalf("first chunk: %+v", resp.Error)
	}
	if resp := send(s, &cur, map[string]any{"op": "file", "path": "a", "append": true, "data": make([]byte, 59)}); !resp.OK { // 100
		t.Fatalf("an append up to the limit: %+v", resp.Error)
	}
	wantErrType(t, "an append one byte past the limit", send(s, &cur, map[string]any{"op": "file", "path": "a", "append": true, "data": []byte{1}}), "LimitExceeded")
	if s.outBytes > 101 || (cur != nil && len(cur.data) > 99) {
		t.Errorf("kept %d bytes (counted %d) past a limit of 100", len(cur.data), s.outBytes)
	}
}
