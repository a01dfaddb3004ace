// Package hostfuncs is the bridge between Python code in the sandbox and tools on the host: the versioned
// guest↔host ABI, the tool registry and the Python module generated from it.
package hostfuncs

import "encoding/json"

// The guest↔host ABI, version 1. See docs/ABI.md for the full contract; these constants are the single source of
// truth on the Go side and must match pyruntime/c/wasmboxmodule.c and the rewriter in internal/wasmbin.
const (
	// ABIVersion is the version of the import module below; the interpreter reports its own through the
	// exported function ExportABIVersion and the host refuses to run an interpreter whose version differs.
	ABIVersion = 1

	// ImportModule is the one import module the interpreter declares besides wasi_snapshot_preview1.
	ImportModule = "wasmbox_v1"

	// ImportCall is call(req_ptr, req_len i32) -> i32. The host copies the request out of guest memory, handles
	// it, keeps the response for this instance and returns its length (≥ 0) or, for an error response, the
	// negated length (< 0). A response of length 0 is encoded as 0.
	ImportCall = "call"
	// ImportFetch is fetch(buf_ptr, buf_len i32) -> i32: the host copies the pending response into the guest's
	// buffer and returns the number of bytes copied, or -1 if there is no pending response or the buffer is
	// too small. The pending response is dropped after a successful fetch.
	ImportFetch = "fetch"
	// ImportCallInto is call_into(req_ptr, req_len, buf_ptr, buf_len i32) -> i32: call, and when the response is
	// at most buf_len bytes the host writes it at buf_ptr instead of keeping it (one crossing instead of two); a
	// larger one is kept for fetch. The return value is call's; the guest knows where the response is from its
	// length. CallIntoBadBuffer, when [buf_ptr, +buf_len) is not inside guest memory: the request is not handled.
	ImportCallInto = "call_into"
	// CallIntoBadBuffer is call_into's answer for a buffer outside guest memory.
	CallIntoBadBuffer = -1 << 31
	// ImportTick is tick() -> i32, called by the instrumentation every TickInterval loop iterations. It returns
	// the next counter value n > 0; a negative value -n asks the guest to raise KeyboardInterrupt (soft
	// interrupt) and sets the counter to n. The host ends the run (hard kill) from inside tick when needed.
	ImportTick = "tick"

	// Exports of the reactor build.
	ExportInitialize = "_initialize"         // wasi-libc constructors; called exactly once per init instance
	ExportABIVersion = "wasmbox_abi_version" // () -> i32
	ExportInit       = "wasmbox_init"        // () -> i32: 0 ok; initialises CPython (isolated config)
	ExportPrepare    = "wasmbox_prepare"     // (ptr, len) -> i32: run source in a private namespace; 0 ok
	ExportExec       = "wasmbox_exec"        // (ptr, len) -> i32: one run (marshal request); returns exit code
	ExportAlloc      = "wasmbox_alloc"       // (n) -> ptr (0 on failure)
	ExportFree       = "wasmbox_free"        // (ptr)
	ExportInterrupt  = "wasmbox_interrupt"   // (): schedule a KeyboardInterrupt (async-signal-safe)
	ExportStackPtr   = "__stack_pointer"     // mutable global exported by the linker
	ExportFuel       = "wasmbox_fuel"        // mutable i32 global added and exported by the rewriter

	// TickInterval is the counter's reset value baked into the instrumented binary.
	TickInterval = 10000
)

// Size limits of the ABI, enforced by the host.
const (
	MaxRequestBytes  = 16 << 20 // a request larger than this is refused with an ABIError
	MaxResponseBytes = 16 << 20 // a response larger than this is replaced by an ABIError
)

// ErrorResponse is the JSON body of an error response: {"type": ..., "message": ...}.
func ErrorResponse(typ, msg string) []byte {
	b, _ := json.Marshal(struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}{typ, msg})
	return b
}
