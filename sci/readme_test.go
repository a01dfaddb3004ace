package sci

import (
	"os"
	"strings"
	"testing"
)

// Every code line of the README's sci block (the Go block of "numpy and pandas") is a line of example_test.go's
// Example, so the README shows code that compiles and runs.
func TestREADMEIsTheExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, l := range strings.Split(string(src), "\n") {
		have[strings.TrimSpace(l)] = true
	}
	_, sec, ok := strings.Cut(string(readme), "\n## numpy and pandas\n")
	if !ok {
		t.Fatal("no numpy and pandas section in the README")
	}
	_, block, ok := strings.Cut(sec, "```go\n")
	if !ok {
		t.Fatal("no Go block in the README's numpy and pandas section")
	}
	code, _, _ := strings.Cut(block, "```")
	n := 0
	for _, l := range strings.Split(code, "\n") {
		if l = strings.TrimSpace(l); l == "" || strings.HasPrefix(l, "//") {
			continue
		}
		n++
		if !have[l] && !have[strings.TrimPrefix(l, "import ")] { // an import line is in the example's import block

			t.Errorf("README line not in example_test.go: %s", l)
		}
	}
	if n < 8 {
		t.Errorf("the README's block has %d lines of code: not the example", n)
	}
}
