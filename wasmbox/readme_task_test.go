package wasmbox_test

import (
	"os"
	"strings"
	"testing"
)

// Every code line of the README's durable-task block is a line of ExampleSandbox_StartTask, so the README shows
// code that compiles and runs.
func TestREADMETaskBlockIsTheExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("example_task_test.go")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, l := range strings.Split(string(src), "\n") {
		have[strings.TrimSpace(l)] = true
	}
	_, sec, ok := strings.Cut(string(readme), "\n## Tasks that outlive a process\n")
	if !ok {
		t.Fatal("no durable-task section in the README")
	}
	_, block, ok := strings.Cut(sec, "```go\n")
	if !ok {
		t.Fatal("no Go block in the README's durable-task section")
	}
	code, _, _ := strings.Cut(block, "```")
	n := 0
	for _, l := range strings.Split(code, "\n") {
		if l = strings.TrimSpace(l); l == "" || strings.HasPrefix(l, "//") {
			continue
		}
		n++
		if !have[l] {
			t.Errorf("README line not in ExampleSandbox_StartTask: %s", l)
		}
	}
	if n < 5 {
		t.Fatalf("the README block has %d code lines; the section changed shape", n)
	}
}
