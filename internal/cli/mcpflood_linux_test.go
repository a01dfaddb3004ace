package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// peakRSS is a process's high-water resident set (VmHWM) in MiB.
func peakRSS(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.Atoi(f[1])
			return kb / 1024
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

func buildCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "wasmbox")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/wasmbox/wasmbox/cmd/wasmbox").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// The two floods a hostile MCP client sent `wasmbox mcp` (round 3), each once over its transport; before the
// queue bounds the server's peak RSS reached 1,686 MiB (HTTP) and 1,940 MiB (stdio). Now calls past
// MaxQueuedCalls and MaxPendingBytes are refused at once and stdio lines past MaxRequestBytes are answered with an
// error. The peak then depends on when the garbage collector runs (210–860 MiB over runs of the HTTP flood here,
// 340 MiB for stdio), not on the number of calls (400 calls: 265 MiB); the bound is set well above that spread
// and well below the unbounded figures.
const floodPeakMiB = 1200

// TestHostileClientFloodHTTP: 150 concurrent 4 MiB run_python calls in one HTTP session.
func TestHostileClientFloodHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the flood sends 600 MiB")
	}
	bin := buildCLI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "mcp", "--http", "127.0.0.1:0")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	br := bufio.NewReader(stderr)
	var url string
	for url == "" {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("no address from wasmbox mcp: %v", err)
		}
		if i := strings.Index(line, "http://"); i >= 0 {
			url = strings.TrimSpace(line[i:])
		}
	}
	go io.Copy(io.Discard, br)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "flood", Version: "1"}, nil).Connect(ctx,
		&sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: 200}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	code := "x = 1  # " + strings.Repeat("a", 4<<20-4096) // the body just under MaxRequestBytes
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ran, refused int
	for i := 0; i < 150; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": code}})
			mu.Lock()
			defer mu.Unlock()
			if err == nil && !r.IsError {
				ran++
			} else {
				refused++
			}
		}()
	}
	wg.Wait()
	peak := peakRSS(t, cmd.Process.Pid)
	t.Logf("HTTP flood: 150 × 4 MiB run_python in one session: %d ran, %d refused; server peak RSS %d MiB (was 1,686 MiB)", ran, refused, peak)
	if ran == 0 {
		t.Error("no call of the flood ran: the bound refuses everything")
	}
	if peak > floodPeakMiB {
		t.Errorf("server peak RSS %d MiB > %d MiB", peak, floodPeakMiB)
	}
	// The server still serves.
	r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "print(6 * 7)"}})
	if err != nil || r.IsError {
		t.Fatalf("after the flood: %v %+v", err, r)
	}
}

// TestHostileClientFloodStdio: 60 × 8 MiB calls written to `wasmbox mcp` over stdio as fast as it reads, then 60
// of 3.9 MiB (under the line bound, so they reach the queue).
func TestHostileClientFloodStdio(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the flood sends 700 MiB")
	}
	bin := buildCLI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "mcp")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	answers := make(chan string, 256)
	go func() {
		br := bufio.NewReaderSize(stdout, 1<<20)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				close(answers)
				return
			}
			answers <- line
		}
	}()
	w := bufio.NewWriterSize(stdin, 1<<20)
	fmt.Fprintln(w, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`)
	fmt.Fprintln(w, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	id := 1
	for _, size := range []int{8 << 20, 4<<20 - 100<<10} {
		pad := strings.Repeat("a", size)
		for i := 0; i < 60; i++ {
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"x = 1  # %s"}}}`+"\n", id, pad)
			id++
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	got := 0
	for got < id { // the initialize answer and one per call
		select {
		case _, ok := <-answers:
			if !ok {
				t.Fatalf("wasmbox mcp ended after %d answers", got)
			}
			got++
		case <-ctx.Done():
			t.Fatalf("%d answers of %d", got, id)
		}
	}
	peak := peakRSS(t, cmd.Process.Pid)
	t.Logf("stdio flood: 60 × 8 MiB + 60 × 3.9 MiB run_python: %d answers; server peak RSS %d MiB (was 1,940 MiB)", got, peak)
	if peak > floodPeakMiB {
		t.Errorf("server peak RSS %d MiB > %d MiB", peak, floodPeakMiB)
	}
}
