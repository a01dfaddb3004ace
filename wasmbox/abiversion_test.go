package wasmbox_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/wasmbox/wasmbox/assets"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/internal/wasmbin"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// otherABI returns a copy of the embedded interpreter whose exported ABI-version function returns version
// instead of hostfuncs.ABIVersion (its body is "i32.const ABIVersion; end": the constant is rewritten in place).
func otherABI(t *testing.T, version int32) *assets.Interpreter {
	t.Helper()
	if version < 0 || version > 63 || hostfuncs.ABIVersion < 0 || hostfuncs.ABIVersion > 63 {
		t.Fatalf("versions %d, %d do not fit a one-byte constant", version, hostfuncs.ABIVersion)
	}
	a, err := assets.Load()
	if err != nil {
		t.Fatal(err)
	}
	m, err := wasmbin.Decode(a.Wasm)
	if err != nil {
		t.Fatal(err)
	}
	exp, ok := m.Export(hostfuncs.ExportABIVersion)
	if !ok || exp.Kind != wasmbin.KindFunc {
		t.Fatalf("no exported function %s", hostfuncs.ExportABIVersion)
	}
	wasm := append([]byte(nil), a.Wasm...)
	found := false
	for _, b := range m.Bodies() {
		if b.Func != exp.Index {
			continue
		}
		at := b.Offset + b.Expr
		if want := []byte{0x41, byte(hostfuncs.ABIVersion), 0x0b}; string(wasm[at:at+3]) != string(want) {
			t.Fatalf("%s body is % x, want % x", hostfuncs.ExportABIVersion, wasm[at:b.Offset+len(b.Code)], want)
		}
		wasm[at+1] = byte(version)
		found = true
	}
	if !found {
		t.Fatalf("no body for %s", hostfuncs.ExportABIVersion)
	}
	sum := sha256.Sum256(wasm)
	return &assets.Interpreter{Wasm: wasm, WasmSHA256: hex.EncodeToString(sum[:]), Stdlib: a.Stdlib, TZData: a.TZData,
		BuildInfo: a.BuildInfo}
}

// An interpreter that speaks another ABI version is refused at New with ErrInterpreter, naming both versions;
// it never runs a program.
func TestABIVersionMismatch(t *testing.T) {
	other := int32(hostfuncs.ABIVersion + 1)
	_, err := wasmbox.New(context.Background(), wasmbox.Config{Interpreter: otherABI(t, other), DisableCompileCache: true})
	if !errors.Is(err, wasmbox.ErrInterpreter) {
		t.Fatalf("New: %v, want ErrInterpreter", err)
	}
	for _, w := range []string{"abi version", fmt.Sprintf("ABI %d", other), fmt.Sprintf("host speaks %d", hostfuncs.ABIVersion)} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	if !strings.HasPrefix(err.Error(), "wasmbox: ") {
		t.Errorf("error %q lacks the package prefix", err)
	}
}
