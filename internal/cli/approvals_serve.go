package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/internal/approvals"
)

// serveApprovals implements `wasmbox approvals serve`: the approvals page on addr until ctx ends.
func serveApprovals(ctx context.Context, gate *governance.Gate, addr string, allowRemote bool, stdout, stderr io.Writer) int {
	if strings.HasPrefix(addr, ":") {
		addr = "127.0.0.1" + addr
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		fmt.Fprintln(stderr, "wasmbox approvals serve: --http:", err)
		return exitUsage
	}
	if ip := net.ParseIP(host); !allowRemote && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		fmt.Fprintf(stderr, "wasmbox approvals serve: --http %s is not a loopback address; the page has no login (add --allow-remote behind your own authentication)\n", addr)
		return exitUsage
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(stderr, "wasmbox approvals serve:", err)
		return exitFailure
	}
	h, err := approvals.NewHandler(approvals.Config{Gate: gate, DecidedBy: "approver:web", Addr: ln.Addr().String()})
	if err != nil {
		ln.Close()
		fmt.Fprintln(stderr, "wasmbox approvals serve:", err)
		return exitFailure
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second}
	fmt.Fprintf(stdout, "wasmbox approvals: serving on http://%s/\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		return 0
	case err := <-errc:
		fmt.Fprintln(stderr, "wasmbox approvals serve:", err)
		return exitFailure
	}
}
