package wasmbox_test

import (
	"context"
	"strings"
	"testing"

	"github.com/wasmbox/wasmbox/wasmbox"
)

// TestZeroWorkspace: the zero Workspace is an empty workspace with the default quotas (it used to panic).
func TestZeroWorkspace(t *testing.T) {
	var ws wasmbox.Workspace
	if files := ws.Files(); len(files) != 0 {
		t.Fatalf("files of a zero workspace: %v", files)
	}
	if err := ws.WriteFile("in.txt", []byte("21")); err != nil {
		t.Fatal(err)
	}
	sb := newSandbox(t, wasmbox.Config{})
	res, err := sb.RunProgram(context.Background(), wasmbox.Program{Workspace: &ws,
		Code: "n = int(open('in.txt').read())\nopen('out.txt', 'w').write(str(2 * n))\nprint('ok')"})
	if err != nil || strings.TrimSpace(res.Stdout) != "ok" {
		t.Fatalf("%v %+v", err, res)
	}
	if b, err := ws.ReadFile("out.txt"); err != nil || string(b) != "42" {
		t.Fatalf("out.txt %q %v", b, err)
	}
	var other wasmbox.Workspace
	if bytes, files := other.Usage(); bytes != 0 || files != 0 {
		t.Errorf("usage of a zero workspace: %d bytes, %d files", bytes, files)
	}
}
