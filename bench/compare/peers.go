package main

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"github.com/wasmbox/wasmbox/bench"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

//go:embed peers.mjs
var peersScript []byte

// peerRow holds a peer sandbox's figures under the same keys as wasmbox's own.
type peerRow struct {
	Package        string       `json:"package"`
	Version        string       `json:"version"`
	FreshRunP50MS  float64      `json:"fresh_run_p50_ms"`
	FreshRun       bench.Spread `json:"fresh_run_ms_spread"`
	W1Seconds      float64      `json:"w1_seconds"`
	W1RatioVsNativ *float64     `json:"w1_ratio_vs_native"`
	W1RatioSpread  bench.Spread `json:"w1_ratio_spread"`
	W2Seconds      float64      `json:"w2_seconds"`
	W2RatioVsNativ *float64     `json:"w2_ratio_vs_native"`
	W2RatioSpread  bench.Spread `json:"w2_ratio_spread"`
	ToolCallUS     *float64     `json:"tool_call_us"`
	ToolCall       bench.Spread `json:"tool_call_us_spread"`
	Errors         []string     `json:"errors,omitempty"`
}

// peer is a running node process serving one peer's workloads (peers.mjs).
type peer struct {
	name, pkg string
	cmd       *exec.Cmd
	in        *os.File
	out       *bufio.Reader
	stderr    *bytes.Buffer
	row       peerRow
	toolUS    []float64
}

var peerPackages = []struct{ name, pkg, entry string }{
	{"pyodide", "pyodide", "pyodide.mjs"},
	{"monty", "@pydantic/monty", "wrapper.js"},
}

// peersDir is where the peers' node_modules is looked for: $WASMBOX_PEERS_DIR, else the user cache directory's
// wasmbox-peers (where .ci/peers.sh installs them).
func peersDir() string {
	if d := os.Getenv("WASMBOX_PEERS_DIR"); d != "" {
		return d
	}
	if c, err := os.UserCacheDir(); err == nil {
		return filepath.Join(c, "wasmbox-peers")
	}
	return ""
}

// startPeers starts a node process for every peer that is installed, and says for the others exactly what was
// looked for and not found.
func startPeers(tmp string) (peers []*peer, missing []string) {
	node, nodeErr := exec.LookPath("node")
	dir := peersDir()
	script := filepath.Join(tmp, "peers.mjs")
	if err := os.WriteFile(script, peersScript, 0o600); err != nil {
		return nil, []string{"peers: " + err.Error()}
	}
	for _, pp := range peerPackages {
		entry := filepath.Join(dir, "node_modules", pp.pkg, pp.entry)
		switch {
		case nodeErr != nil:
			missing = append(missing, fmt.Sprintf("%s: looked for node on PATH: not found (%v)", pp.name, nodeErr))
			continue
		case dir == "":
			missing = append(missing, pp.name+": no directory to look in (set WASMBOX_PEERS_DIR)")
			continue
		}
		if _, err := os.Stat(entry); err != nil {
			missing = append(missing, fmt.Sprintf("%s: looked for %s (npm package %s, installed by .ci/peers.sh; WASMBOX_PEERS_DIR overrides the directory): not found", pp.name, entry, pp.pkg))
			continue
		}
		p, err := startPeer(node, script, filepath.Join(dir, "node_modules"), pp.name, pp.pkg)
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s: found %s but it did not start: %v", pp.name, entry, err))
			continue
		}
		peers = append(peers, p)
	}
	return peers, missing
}

func startPeer(node, script, modules, name, pkg string) (*peer, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(node, script, name, modules)
	cmd.ExtraFiles = []*os.File{w}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, err
	}
	w.Close()
	p := &peer{name: name, pkg: pkg, cmd: cmd, in: stdin.(*os.File), out: bufio.NewReader(r), stderr: &stderr}
	var ready struct {
		Ready   bool   `json:"ready"`
		Version string `json:"version"`
		Error   string `json:"error"`
	}
	if err := p.read(&ready); err != nil || !ready.Ready {
		p.stop()
		return nil, fmt.Errorf("%v %s %s", err, ready.Error, strings.TrimSpace(stderr.String()))
	}
	p.row = peerRow{Package: pkg, Version: ready.Version}
	return p, nil
}

func (p *peer) read(v any) error {
	line, err := p.out.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("%s: no answer: %w", p.name, err)
	}
	return json.Unmarshal(line, v)
}

// ask sends one request and returns the number answered under key.
func (p *peer) ask(req map[string]any, key string) (float64, error) {
	b, _ := json.Marshal(req)
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		return 0, fmt.Errorf("%s: %w", p.name, err)
	}
	var ans map[string]any
	if err := p.read(&ans); err != nil {
		return 0, err
	}
	if net, ok := ans["network"]; ok {
		return 0, fmt.Errorf("%s tried the network: %v", p.name, net)
	}
	if e, ok := ans["error"].(string); ok {
		return 0, fmt.Errorf("%s", e)
	}
	v, ok := ans[key].(float64)
	if !ok {
		return 0, fmt.Errorf("%s: answer without %q", p.name, key)
	}
	return v, nil
}

func (p *peer) fail(what string, err error) {
	p.row.Errors = append(p.row.Errors, what+": "+err.Error())
}

func (p *peer) stop() {
	if p.in != nil {
		p.in.Close()
	}
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}
