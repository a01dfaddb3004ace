package wasmbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/wasmbox"
)

// TestDeadlineBulkMemory runs C-level loops whose every iteration is one huge memcpy or memset (with bulk memory,
// one memory.copy or memory.fill instruction, which no loop header interrupts) under a 1 s deadline: each must
// end with ErrTimeout well before 3 s (they ran 13 s and more when only loop headers counted).
func TestDeadlineBulkMemory(t *testing.T) {
	progs := map[string]string{
		"copy 110 MB": "import itertools, collections\nb = bytearray(110 << 20)\n" +
			"collections.deque(map(bytes, itertools.repeat(b)), maxlen=0)",
		"fill 110 MB":       "import itertools, collections\ncollections.deque(map(bytearray, itertools.repeat(110 << 20)), maxlen=0)",
		"python copy loop":  "b = bytearray(110 << 20)\nwhile True:\n    c = bytes(b)",
		"slice assignments": "b = bytearray(200 << 20)\nwhile True:\n    b[1:] = b[:-1]",
	}
	for _, n := range []string{"85_bulk_copy_c_loop.py", "86_bulk_fill_c_loop.py", "87_bulk_repeat_c_loop.py"} {
		src, err := os.ReadFile(filepath.Join("testdata", "escapes", n))
		if err != nil {
			t.Fatal(err)
		}
		progs[n] = string(src)
	}
	sb := newSandbox(t, wasmbox.Config{Timeout: time.Second, MemoryLimit: 512 << 20})
	run(t, sb, "print(1)") // the interpreter is ready before the clock starts
	for name, code := range progs {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			_, err := sb.RunProgram(context.Background(), wasmbox.Program{Code: code})
			d := time.Since(start)
			if !errors.Is(err, wasmbox.ErrTimeout) {
				t.Fatalf("err %v after %v, want ErrTimeout", err, d)
			}
			if d > 3*time.Second {
				t.Errorf("stopped after %v with a 1 s deadline", d)
			}
		})
	}
}
