package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
)

// TestREADMETourIsThisProgram: every code line of the README's tour blocks (the first two Go blocks of "A short
// tour") appears in main.go, so the README shows code that compiles.
func TestREADMETourIsThisProgram(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, l := range strings.Split(string(src), "\n") {
		have[strings.TrimSpace(l)] = true
	}
	_, tour, ok := strings.Cut(string(readme), "## A short tour")
	if !ok {
		t.Fatal("no tour in the README")
	}
	blocks := strings.Split(tour, "```go\n")
	if len(blocks) < 3 {
		t.Fatal("the tour has fewer than two Go blocks")
	}
	for _, b := range blocks[1:3] {
		code, _, _ := strings.Cut(b, "```")
		for _, l := range strings.Split(code, "\n") {
			l = strings.TrimSpace(l)
			if l == "" || strings.HasPrefix(l, "//") {
				continue
			}
			if !have[l] {
				t.Errorf("README tour line not in examples/tour/main.go: %s", l)
			}
		}
	}
}

// TestTourRuns runs the tour and checks what it prints.
func TestTourRuns(t *testing.T) {
	r, w, _ := os.Pipe()
	stdout := os.Stdout
	os.Stdout = w
	err := tour(context.Background())
	os.Stdout = stdout
	w.Close()
	var out bytes.Buffer
	io.Copy(&out, r)
	if err != nil {
		t.Fatal(err)
	}
	want := "2432902008176640000\na,b\n1,2\n\n42\n129.5\n1 tool call(s), the first ok\n"
	if out.String() != want {
		t.Errorf("tour printed %q, want %q", out.String(), want)
	}
}
