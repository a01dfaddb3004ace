package engine

import (
	"context"
	"encoding/binary"
	"os"
	"strings"
	"testing"
)

// bigCodeModule is a module whose compiled code is larger than a huge page: funcs exported functions, each
// (func (param i32) (result i32)) storing its parameter to n distinct addresses of a one-page memory and
// returning it. Stores with distinct offsets are neither folded nor removed by wazero's compiler.
func bigCodeModule(funcs, n int) []byte {
	uleb := func(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }
	section := func(out []byte, id byte, body []byte) []byte {
		out = append(out, id)
		out = uleb(out, uint64(len(body)))
		return append(out, body...)
	}
	out := []byte("\x00asm\x01\x00\x00\x00")
	out = section(out, 1, []byte{1, 0x60, 1, 0x7f, 1, 0x7f}) // type 0: (i32) -> i32
	fsec := uleb(nil, uint64(funcs))
	for range funcs {
		fsec = append(fsec, 0)
	}
	out = section(out, 3, fsec)
	out = section(out, 5, []byte{1, 0, 1}) // memory 0: min 1 page
	var exp []byte
	exp = uleb(exp, uint64(funcs))
	for i := range funcs {
		name := []byte("f" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676%26)))
		exp = uleb(exp, uint64(len(name)))
		exp = append(exp, name...)
		exp = append(exp, 0)
		exp = uleb(exp, uint64(i))
	}
	out = section(out, 7, exp)
	var body []byte
	body = append(body, 0) // no locals
	for k := range n {
		body = append(body, 0x41, 0)         // i32.const 0
		body = append(body, 0x20, 0)         // local.get 0
		body = append(body, 0x36, 2)         // i32.store align=4
		body = uleb(body, uint64(k%16000)*4) // offset
	}
	body = append(body, 0x20, 0, 0x0b) // local.get 0; end
	code := uleb(nil, uint64(funcs))
	for range funcs {
		code = uleb(code, uint64(len(body)))
		code = append(code, body...)
	}
	return section(out, 10, code)
}

// A module's compiled code loaded from the cache is checked as before: with its region in huge pages
// (hugecode_linux.go) a corrupted or truncated cache file is still an error, never code that runs.
func TestCompileRejectsDamagedCacheFile(t *testing.T) {
	wasm := bigCodeModule(16, 4000) // about 4.6 MB of code: more than a huge page
	ctx := context.Background()
	for _, damage := range []string{"corrupted", "truncated"} {
		t.Run(damage, func(t *testing.T) {
			dir := t.TempDir()
			compile := func() error {
				eng, err := NewWazero(ctx, WazeroConfig{CacheDir: dir})
				if err != nil {
					t.Fatal(err)
				}
				defer eng.Close(ctx)
				m, err := eng.Compile(ctx, wasm)
				if err != nil {
					return err
				}
				defer m.Close(ctx)
				inst, err := m.Instantiate(ctx, InstanceConfig{})
				if err != nil {
					t.Fatal(err)
				}
				defer inst.Close(ctx)
				res, err := inst.Call(ctx, "faaa", 42)
				if err != nil || len(res) != 1 || res[0] != 42 {
					t.Fatalf("faaa(42) = %v, %v; want 42", res, err)
				}
				return nil
			}
			if err := compile(); err != nil { // a miss: compiles and writes the cache file
				t.Fatal(err)
			}
			if err := compile(); err != nil { // a hit: the code is read from the file, into huge pages on Linux
				t.Fatal(err)
			}
			path := WazeroCodeFile(dir, wasm)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if damage == "corrupted" {
				b[len(b)/2] ^= 0xff // inside the machine code
			} else {
				b = b[:len(b)*2/3]
			}
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			err = compile()
			if err == nil {
				t.Fatalf("a %s cache file was accepted", damage)
			}
			if !strings.Contains(err.Error(), "compilationcache") {
				t.Fatalf("a %s cache file: %v, not wazero's cache check", damage, err)
			}
		})
	}
}
