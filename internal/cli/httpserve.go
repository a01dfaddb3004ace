package cli

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// errNotLoopback is listenHTTP's refusal of an address that is not loopback.
type errNotLoopback struct{ addr string }

func (e errNotLoopback) Error() string {
	return fmt.Sprintf("--http %s is not a loopback address", e.addr)
}

// listenHTTP listens on addr (":N" means 127.0.0.1:N), refusing an address that is not loopback unless
// allowRemote: the servers of the CLI have no authentication of their own.
func listenHTTP(addr string, allowRemote bool) (net.Listener, error) {
	if strings.HasPrefix(addr, ":") {
		addr = "127.0.0.1" + addr
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--http: %w", err)
	}
	if ip := net.ParseIP(host); !allowRemote && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, errNotLoopback{addr}
	}
	return net.Listen("tcp", addr)
}

// serveHTTP serves h on ln until ctx ends (then shuts down within 5 s) or the server fails.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler, hs *http.Server) error {
	hs.Handler = h
	if hs.ReadHeaderTimeout == 0 {
		hs.ReadHeaderTimeout = 10 * time.Second
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		return nil
	case err := <-errc:
		return err
	}
}
