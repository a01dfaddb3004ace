// Package engine is the seam between wasmbox and the WebAssembly runtime that executes the interpreter.
//
// Nothing outside internal/ sees these types. The default engine is wazero (pure Go); another engine only has to
// provide Engine, Module and Instance with the same semantics:
//
//   - Compile once per process, instantiate per run or recycle: an Instance that is also a Recycler may serve
//     another run once Recycle has put it back to the state instantiation made; an Instance whose call did not
//     return normally (a trap, proc_exit, a kill) takes no further calls and is never recycled.
//   - The host ABI (hostfuncs.ImportModule) is served by a per-instance Host; the engine only moves bytes.
//   - Every host function runs on the goroutine that called Instance.Call, so nothing writes guest state from
//     another goroutine (Go cannot preempt compiled guest code, so such a write can hang the process under GC).
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"

	"github.com/wasmbox/wasmbox/hostfuncs"
)

// Engine compiles interpreter binaries.
type Engine interface {
	// Compile validates and compiles a module. It may use an on-disk cache.
	Compile(ctx context.Context, wasm []byte) (Module, error)
	// Close releases every module and instance of this engine.
	Close(ctx context.Context) error
}

// Module is a compiled module that can be instantiated many times, concurrently.
type Module interface {
	// Instantiate creates a fresh instance. No start function runs: the caller drives the reactor exports.
	Instantiate(ctx context.Context, cfg InstanceConfig) (Instance, error)
	// ExportedFunctions lists the names of exported functions.
	ExportedFunctions() []string
	Close(ctx context.Context) error
}

// Host serves the guest's calls to the wasmbox import module for one instance.
type Host interface {
	// Call handles one request copied out of guest memory. isError marks an error response.
	Call(ctx context.Context, req []byte) (resp []byte, isError bool)
	// Tick is called by the interpreter's loop instrumentation. It returns the next counter value (negative to
	// ask for a soft interrupt) or kill=true to end the run at once; the instance is then unusable.
	Tick(ctx context.Context) (next int32, kill bool)
}

// A CallKiller is a Host whose Call can end the run: after every Call the engine asks KillAfterCall, and when it
// returns true the run ends as for a kill from Tick (Instance.Call returns ErrKilled, the response is never
// delivered to the guest and the instance is unusable).
type CallKiller interface {
	KillAfterCall() bool
}

// Mount is one directory the guest sees. Exactly one of FS (read-only) and SysFS (read-write unless ReadOnly)
// is set.
type Mount struct {
	GuestPath string
	FS        fs.FS
	SysFS     experimentalsys.FS
	// ReadOnly makes a SysFS mount read-only for the guest (the host may still change it).
	ReadOnly bool
}

// InstanceConfig is everything an instance sees of the outside world. Zero values deny: no input, output
// discarded, no mounts, fake clocks and zero randomness (callers always set them explicitly).
type InstanceConfig struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Mounts         []Mount
	Walltime       func() (sec int64, nsec int32)
	Nanotime       func() int64
	Nanosleep      func(ns int64)
	Rand           io.Reader
	// Memory supplies linear memory; nil lets the engine allocate without a limit beyond the module's.
	Memory MemoryAllocator
	Host   Host
}

// Instance is one instantiated module.
type Instance interface {
	// Call invokes an exported function. ctx reaches the Host's methods.
	Call(ctx context.Context, name string, params ...uint64) ([]uint64, error)
	// Read copies n bytes at offset out of linear memory.
	Read(offset, n uint32) ([]byte, bool)
	// Write copies data into linear memory at offset.
	Write(offset uint32, data []byte) bool
	// MemorySize is the current size of linear memory in bytes.
	MemorySize() uint32
	// Global reads an exported global.
	Global(name string) (uint64, bool)
	// MemoryBytes exposes linear memory (valid until the next guest call); for snapshots only.
	MemoryBytes() []byte
	Close(ctx context.Context) error
}

// A Recycler is an Instance that can serve another run instead of being closed. Between Recycle and Reuse it
// is idle and takes no calls.
type Recycler interface {
	// Recycle ends the current run and returns the instance to the state it had when it was instantiated: it
	// closes the files the guest left open and forgets the run's Host and WASI state, resets linear memory in
	// place to the image it was allocated from, and sets every mutable global back to its initial value. It
	// fails, and the instance must then be closed, when that cannot be done or is not known to be complete: a
	// call that did not return normally, memory that grew, memory with no image, or a module that does not
	// carry the proof that memory and globals are all that can change (wasmbin.ResetSection).
	Recycle() error
	// Reuse gives a recycled instance the outside world of a new run. cfg.Memory is not used: the instance
	// keeps its memory.
	Reuse(cfg InstanceConfig) error
}

// An ImageMemory is a LinearMemory that can go back to the image it was allocated from, in place (the buffer
// does not move). ResetToImage fails if the memory grew past the image.
type ImageMemory interface {
	ResetToImage() error
}

// ErrKilled is returned by Instance.Call when the Host asked for a hard kill from Tick.
var ErrKilled = errors.New("engine: run killed")

// ErrExit is returned (wrapped) when the guest called proc_exit; ExitCode extracts the code.
type ExitError struct{ Code uint32 }

func (e *ExitError) Error() string { return "engine: guest exited" }

// Serve handles the guest's request [ptr, +n) of mem with host, as every engine's call and call_into do: the
// request is copied out of guest memory before the host sees it; a length out of range, a request outside
// memory and a response over hostfuncs.MaxResponseBytes become ABIError responses. kill reports that the host
// ended the run during the call (CallKiller): the engine must then stop the guest instead of answering.
func Serve(ctx context.Context, host Host, mem GuestMem, ptr uint32, n int32) (resp []byte, isErr, kill bool) {
	if n < 0 || n > hostfuncs.MaxRequestBytes {
		return hostfuncs.ErrorResponse("ABIError", fmt.Sprintf("request length %d out of range (max %d)", n, hostfuncs.MaxRequestBytes)), true, false
	}
	req, ok := mem.Slice(ptr, uint32(n))
	if !ok {
		return hostfuncs.ErrorResponse("ABIError", fmt.Sprintf("request [%d, +%d) outside guest memory", ptr, n)), true, false
	}
	req = append([]byte(nil), req...) // always copy out of guest memory
	resp, isErr = host.Call(ctx, req)
	if k, ok := host.(CallKiller); ok && k.KillAfterCall() {
		return nil, false, true
	}
	if len(resp) > hostfuncs.MaxResponseBytes {
		resp, isErr = hostfuncs.ErrorResponse("ABIError", fmt.Sprintf("response of %d bytes exceeds the limit of %d", len(resp), hostfuncs.MaxResponseBytes)), true
	}
	return resp, isErr, false
}

// ResponseLength is what call and call_into return for resp: its length, negated for an error response.
func ResponseLength(resp []byte, isErr bool) int32 {
	if isErr {
		return -int32(len(resp))
	}
	return int32(len(resp))
}
