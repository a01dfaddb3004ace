package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"

	"golang.org/x/sys/cpu"
)

// WazeroCodeFile returns the file in which a wazero compilation cache rooted at dir keeps the compiled code of
// wasm ("" if dir is). It mirrors wazero v1.12's own naming: a directory per wazero version, GOARCH and
// GOOS, and a file named by the SHA-256 of the module's ID (WazeroModuleID), the compiler's magic and the CPU
// features the code was compiled for. A test compiles a module and checks that the file is where this says, so a
// wazero upgrade that changes the scheme fails loudly instead of silently missing.
func WazeroCodeFile(dir string, wasm []byte) string {
	if dir == "" {
		return ""
	}
	return WazeroCodeFileForID(dir, WazeroModuleID(wasm))
}

// WazeroModuleID is wazero's ID of a module: the SHA-256 of its bytes and of the ensure-termination flag (off
// here).
func WazeroModuleID(wasm []byte) [sha256.Size]byte {
	id := sha256.New()
	id.Write(wasm)
	id.Write([]byte{0}) // no close-on-context-done
	var mid [sha256.Size]byte
	id.Sum(mid[:0])
	return mid
}

// WazeroCodeFileForID is WazeroCodeFile for a module whose WazeroModuleID is known: it costs no pass over the
// module.
func WazeroCodeFileForID(dir string, mid [sha256.Size]byte) string {
	if dir == "" {
		return ""
	}
	k := sha256.New()
	k.Write(mid[:])
	k.Write([]byte("WAZEVO"))
	var feat [8]byte
	binary.LittleEndian.PutUint64(feat[:], WazeroCPUFeatures())
	k.Write(feat[:])
	return filepath.Join(WazeroCodeDir(dir), hex.EncodeToString(k.Sum(nil)))
}

// WazeroCodeDir is the directory in which a wazero compilation cache rooted at dir keeps its files.
func WazeroCodeDir(dir string) string {
	return filepath.Join(dir, "wazero-"+WazeroVersion()+"-"+runtime.GOARCH+"-"+runtime.GOOS)
}

// WazeroVersion is the version of the wazero module linked in, as wazero itself reads it: "dev" when the build
// does not record it (test binaries).
func WazeroVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	for _, dep := range info.Deps {
		if strings.Contains(dep.Path, "github.com/tetratelabs/wazero") {
			if v := dep.Version; v != "" && v != "(devel)" { // as wazero reads it (a replace keeps the version)
				return v
			}
		}
	}
	return "dev"
}

// WazeroCPUFeatures are the CPU features wazero compiles for (its cache key includes them): code compiled on a
// machine with other features is not used.
func WazeroCPUFeatures() uint64 {
	var f uint64
	switch runtime.GOARCH {
	case "amd64":
		if cpu.X86.HasSSE41 {
			f |= 1
		}
		if cpu.X86.HasBMI1 {
			f |= 2
		}
		if cpu.X86.HasBMI1 && cpu.X86.HasBMI2 && cpu.X86.HasPOPCNT {
			f |= 4
		}
	case "arm64":
		if cpu.ARM64.HasATOMICS {
			f |= 1
		}
	}
	return f
}
