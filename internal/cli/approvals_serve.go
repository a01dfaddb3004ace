package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/internal/approvals"
)

// serveApprovals implements `wasmbox approvals serve`: the approvals page on addr until ctx ends.
func serveApprovals(ctx context.Context, gate *governance.Gate, addr string, allowRemote bool, stdout, stderr io.Writer) int {
	ln, err := listenHTTP(addr, allowRemote)
	var nl errNotLoopback
	if errors.As(err, &nl) {
		fmt.Fprintf(stderr, "wasmbox approvals serve: %v; the page has no login (add --allow-remote behind your own authentication)\n", err)
		return exitUsage
	}
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
	fmt.Fprintf(stdout, "wasmbox approvals: serving on http://%s/\n", ln.Addr())
	if err := serveHTTP(ctx, ln, h, &http.Server{ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second}); err != nil {
		fmt.Fprintln(stderr, "wasmbox approvals serve:", err)
		return exitFailure
	}
	return 0
}
