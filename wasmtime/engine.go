package wasmtime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/wasmbox/wasmbox/internal/engine"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/internal/wasmbin"
)

// wasmtimeVersion names the compiled artifacts in the cache directory; wasmtime also refuses (with an error, then
// we recompile) an artifact from another version or with other engine settings.
const wasmtimeVersion = "wasmtime-go-v39.0.1"

// wasmtimeConfig configures the wasmtime engine.
type wasmtimeConfig struct {
	// CacheDir holds serialized compiled modules (<CacheDir>/<version>-<arch>-<sha256>.cwasm); empty means no
	// disk cache. The files are trusted: deserializing one is as unsafe as loading native code.
	CacheDir string
	// MaxWasmStack is the native stack wasm code may use, in bytes. 0 picks half the thread stack, at most 4 MiB
	// (see defaultWasmStack). It must stay well below the real stack of the calling thread: wasm runs on it.
	MaxWasmStack int
}

type wasmtimeEngine struct {
	engine   *wasmtime.Engine
	linker   *wasmtime.Linker
	cacheDir string
}

// newWasmtime creates a wasmtime (Cranelift) engine with the wasmbox host module and a WASI preview 1 implemented
// in Go over the same InstanceConfig as NewWazero: in-memory mounts only, never a host directory.
//
// Differences from NewWazero:
//   - Memory: wasmtime-go cannot take a custom memory creator, so InstanceConfig.Memory only supplies the limit
//     (enforced by the store's limiter: memory.grow past it returns -1) and the initial contents. A snapshot
//     image in a file (engine.ImageMapper, Linux and macOS) is mapped copy-on-write over the start of the
//     instance's memory once wasmtime made it; any other image is copied in.
//   - Deadlines: the same tick import as wazero; a kill is a trap raised from inside tick.
func newWasmtime(_ context.Context, cfg wasmtimeConfig) (engine.Engine, error) {
	c := wasmtime.NewConfig()
	c.SetStrategy(wasmtime.StrategyCranelift)
	c.SetCraneliftOptLevel(wasmtime.OptLevelSpeed)
	if cfg.MaxWasmStack <= 0 {
		cfg.MaxWasmStack = defaultWasmStack()
	}
	if cfg.MaxWasmStack > 0 {
		c.SetMaxWasmStack(cfg.MaxWasmStack)
	}
	eng := wasmtime.NewEngineWithConfig(c)
	l := wasmtime.NewLinker(eng)
	e := &wasmtimeEngine{engine: eng, linker: l, cacheDir: cfg.CacheDir}
	if err := defineWasmbox(l); err != nil {
		return nil, fmt.Errorf("engine: host module: %w", err)
	}
	if err := defineWASI(l); err != nil {
		return nil, fmt.Errorf("engine: WASI: %w", err)
	}
	if cfg.CacheDir != "" {
		if err := os.MkdirAll(cfg.CacheDir, 0o700); err != nil {
			return nil, fmt.Errorf("engine: compilation cache %s: %w", cfg.CacheDir, err)
		}
	}
	return e, nil
}

func (e *wasmtimeEngine) cachePath(wasm []byte) string {
	sum := sha256.Sum256(wasm)
	return filepath.Join(e.cacheDir, fmt.Sprintf("%s-%s-%s.cwasm", wasmtimeVersion, runtime.GOARCH, hex.EncodeToString(sum[:])))
}

func (e *wasmtimeEngine) Compile(_ context.Context, wasm []byte) (engine.Module, error) {
	var mod *wasmtime.Module
	if e.cacheDir != "" {
		if m, err := wasmtime.NewModuleDeserializeFile(e.engine, e.cachePath(wasm)); err == nil {
			mod = m
		}
	}
	if mod == nil {
		m, err := wasmtime.NewModule(e.engine, wasm)
		if err != nil {
			return nil, fmt.Errorf("engine: compile: %w", err)
		}
		mod = m
		if e.cacheDir != "" {
			if b, err := m.Serialize(); err == nil {
				_ = engine.WriteFileAtomic(e.cachePath(wasm), b) // a cache that cannot be written only costs time
			}
		}
	}
	wm := &wasmtimeModule{e: e, mod: mod, memMax: 1 << 32}
	wm.resetGlobals, wm.resettable = wasmbin.ResetGlobals(wasm)
	for _, ex := range mod.Exports() {
		t := ex.Type()
		switch {
		case t.FuncType() != nil:
			wm.funcs = append(wm.funcs, ex.Name())
		case t.MemoryType() != nil && ex.Name() == "memory":
			if ok, pages := t.MemoryType().Maximum(); ok {
				wm.memMax = pages << 16
			}
		}
	}
	return wm, nil
}

// Close releases the engine. Modules and instances hold their own references, so closing is left to the
// garbage collector for those still alive.
func (e *wasmtimeEngine) Close(context.Context) error {
	e.linker.Close()
	e.engine.Close()
	return nil
}

type wasmtimeModule struct {
	e      *wasmtimeEngine
	mod    *wasmtime.Module
	funcs  []string
	memMax uint64 // the exported memory's declared maximum in bytes (4 GiB if none)
	// resettable: the module carries wasmbin.ResetSection, whose names are resetGlobals.
	resettable   bool
	resetGlobals []string
}

func (m *wasmtimeModule) ExportedFunctions() []string { return append([]string(nil), m.funcs...) }

func (m *wasmtimeModule) Close(context.Context) error {
	m.mod.Close()
	return nil
}

func (m *wasmtimeModule) Instantiate(ctx context.Context, cfg engine.InstanceConfig) (engine.Instance, error) {
	w, err := engine.NewWASI(cfg)
	if err != nil {
		return nil, err
	}
	inst := &wasmtimeInstance{host: cfg.Host, wasi: w, ctx: ctx, funcs: map[string]*wasmtime.Func{}}
	inst.store = wasmtime.NewStoreWithData(m.e.engine, inst)

	// The allocator gives the limit and the initial contents (a snapshot image); the memory itself is wasmtime's.
	// An image in a file is mapped over it copy-on-write; any other is copied in.
	var initial []byte
	mapper, _ := cfg.Memory.(engine.ImageMapper)
	if mapper != nil {
		inst.limit = min(max(min(mapper.Limit(), m.memMax), mapper.ImageSize()), math.MaxInt64)
		inst.store.Limiter(int64(inst.limit), -1, -1, -1, -1)
	} else if cfg.Memory != nil {
		limit, image, release, err := memorySource(cfg.Memory, m.memMax)
		if err != nil {
			w.Close()
			inst.store.Close()
			return nil, err
		}
		defer release()
		inst.limit = min(limit, math.MaxInt64)
		inst.store.Limiter(int64(inst.limit), -1, -1, -1, -1)
		initial = image
	}
	instance, err := m.e.linker.Instantiate(inst.store, m.mod)
	if err != nil {
		w.Close()
		inst.store.Close()
		return nil, fmt.Errorf("engine: instantiate: %w", err)
	}
	inst.instance = instance
	if ex := instance.GetExport(inst.store, "memory"); ex != nil {
		inst.mem = ex.Memory()
	}
	size := uint64(len(initial))
	if mapper != nil {
		size = mapper.ImageSize()
	}
	if size > 0 {
		if inst.mem == nil {
			inst.Close(ctx)
			return nil, errors.New("engine: instantiate: an initial memory image for a module without memory")
		}
		if have := uint64(inst.mem.DataSize(inst.store)); have < size {
			if _, err := inst.mem.Grow(inst.store, (size-have+0xffff)>>16); err != nil {
				inst.Close(ctx)
				return nil, fmt.Errorf("engine: instantiate: memory image of %d bytes: %w", size, err)
			}
		}
		if mapper != nil {
			// wasmtime's memory is one mapping that never moves (a 64-bit host reserves the whole 4 GiB), and it
			// only ever unmaps it whole: the image's pages may stand in for its first bytes.
			if err := mapper.MapImage(inst.mem.UnsafeData(inst.store)); err != nil {
				inst.Close(ctx)
				return nil, fmt.Errorf("engine: instantiate: %w", err)
			}
			inst.image = mapper
			if m.resettable {
				inst.globals = resetGlobals(inst, m.resetGlobals)
			}
		} else {
			copyNonZero(inst.mem.UnsafeData(inst.store), initial)
		}
	}
	return inst, nil
}

// copyNonZero copies src into dst, which is all zeros (fresh memory), skipping the pages of src that are zero:
// an initialised interpreter's image is mostly untouched stack and heap, and writing a page costs a fault.
func copyNonZero(dst, src []byte) {
	const page = 4096
	var zero [page]byte
	for off := 0; off < len(src); off += page {
		end := min(off+page, len(src))
		if !bytes.Equal(src[off:end], zero[:end-off]) {
			copy(dst[off:end], src[off:end])
		}
	}
}

// memorySource reads what wasmtime needs of an allocator: the limit and the initial contents (valid until
// release). Allocators may say it directly (optional methods Limit() uint64 and ImageBytes() []byte, which spare
// a reservation and, for an image, mapping it once more); otherwise one memory is allocated to look at. It fails
// closed: an instance without its limit must not run.
func memorySource(a engine.MemoryAllocator, moduleMax uint64) (limit uint64, image []byte, release func(), err error) {
	if l, ok := a.(interface{ Limit() uint64 }); ok {
		if img, ok := a.(interface{ ImageBytes() []byte }); ok {
			return l.Limit(), img.ImageBytes(), func() {}, nil
		}
	}
	if limit, ok := engine.AllocatorLimit(a); ok {
		return min(limit, moduleMax), nil, func() {}, nil
	}
	lm := a.Allocate(moduleMax)
	limit, ok := linearMemoryLimit(lm)
	if !ok {
		lm.Free()
		return 0, nil, nil, fmt.Errorf("engine: instantiate: cannot read the memory limit of a %T", lm)
	}
	return limit, lm.Reallocate(0), lm.Free, nil
}

// linearMemoryLimit finds the most memory lm may reach: an optional Limit method, else what the engine
// package's own memories record.
func linearMemoryLimit(lm engine.LinearMemory) (uint64, bool) {
	if l, ok := lm.(interface{ Limit() uint64 }); ok {
		return l.Limit(), true
	}
	return engine.MemoryLimit(lm)
}

type wasmtimeInstance struct {
	store    *wasmtime.Store
	instance *wasmtime.Instance
	mem      *wasmtime.Memory
	host     engine.Host
	wasi     *engine.WASI
	limit    uint64
	funcs    map[string]*wasmtime.Func

	// ctx is the context of the current Call; host functions run on its goroutine.
	ctx context.Context

	pending  []byte
	hasResp  bool
	killed   bool
	exited   bool
	exitCode uint32
	closed   bool

	// For Recycle: image is what the memory was mapped from (nil if it was not), globals the mutable globals
	// with their initial values (nil if the module cannot be reset), and failed is set by the first Call that
	// did not return normally (a trap, proc_exit, a kill, a host function's panic).
	image   engine.ImageMapper
	globals []globalReset
	failed  bool
}

type globalReset struct {
	g       *wasmtime.Global
	initial wasmtime.Val
}

// resetGlobals finds the mutable globals named by the module's wasmbin.ResetSection, with their values now
// (just after instantiation); nil if one of them is not an exported mutable global, as the section promised.
func resetGlobals(i *wasmtimeInstance, names []string) []globalReset {
	out := make([]globalReset, 0, len(names))
	for _, name := range names {
		ex := i.instance.GetExport(i.store, name)
		if ex == nil || ex.Global() == nil || !ex.Global().Type(i.store).Mutable() {
			return nil
		}
		out = append(out, globalReset{g: ex.Global(), initial: ex.Global().Get(i.store)})
	}
	return out
}

func (i *wasmtimeInstance) Call(ctx context.Context, name string, params ...uint64) (res []uint64, err error) {
	if i.closed {
		return nil, fmt.Errorf("engine: %s: instance closed", name)
	}
	if i.killed {
		return nil, engine.ErrKilled
	}
	if i.exited {
		return nil, &engine.ExitError{Code: i.exitCode}
	}
	if i.failed {
		return nil, fmt.Errorf("engine: %s: instance unusable after a failed call", name)
	}
	if i.wasi == nil {
		// Between Recycle and Reuse: whatever a call wrote would not be undone before the next run.
		return nil, fmt.Errorf("engine: %s: instance recycled and not yet reused", name)
	}
	fn := i.funcs[name]
	if fn == nil {
		fn = i.instance.GetFunc(i.store, name)
		if fn == nil {
			return nil, fmt.Errorf("engine: no exported function %q", name)
		}
		i.funcs[name] = fn
	}
	ft := fn.Type(i.store)
	pt := ft.Params()
	if len(params) != len(pt) {
		return nil, fmt.Errorf("engine: %s: %d parameters for %d", name, len(params), len(pt))
	}
	args := make([]interface{}, len(params))
	for k, p := range params {
		switch pt[k].Kind() {
		case wasmtime.KindI32:
			args[k] = int32(uint32(p))
		case wasmtime.KindI64:
			args[k] = int64(p)
		case wasmtime.KindF32:
			args[k] = math.Float32frombits(uint32(p))
		case wasmtime.KindF64:
			args[k] = math.Float64frombits(p)
		default:
			return nil, fmt.Errorf("engine: %s: unsupported parameter type %v", name, pt[k])
		}
	}
	prev := i.ctx
	i.ctx = ctx
	defer func() {
		i.ctx = prev
		// wasmtime-go re-raises a host function's panic here; report it like any other failure of the call.
		if r := recover(); r != nil {
			i.failed = true
			res, err = nil, fmt.Errorf("engine: %s: host function panicked: %v", name, r)
		}
	}()
	out, callErr := fn.Call(i.store, args...)
	if callErr != nil {
		i.failed = true
		switch {
		case i.killed:
			return nil, engine.ErrKilled
		case i.exited:
			return nil, &engine.ExitError{Code: i.exitCode}
		}
		return nil, fmt.Errorf("engine: %s: %w", name, trapError{callErr})
	}
	switch v := out.(type) {
	case nil:
		return nil, nil
	case []wasmtime.Val:
		res = make([]uint64, len(v))
		for k, x := range v {
			res[k] = valBits(x.Get())
		}
		return res, nil
	default:
		return []uint64{valBits(v)}, nil
	}
}

// trapError shortens wasmtime's trap messages, which embed the whole wasm backtrace (thousands of lines for a
// stack overflow), to the cause; Unwrap gives the original.
type trapError struct{ err error }

func (e trapError) Error() string {
	msg := e.err.Error()
	if i := strings.Index(msg, "Caused by:"); i >= 0 {
		if cause, _, _ := strings.Cut(strings.TrimSpace(msg[i+len("Caused by:"):]), "\n"); cause != "" {
			return cause + fmt.Sprintf(" (%d frames)", strings.Count(msg[:i], "\n")-1)
		}
	}
	return msg
}

func (e trapError) Unwrap() error { return e.err }

func valBits(v interface{}) uint64 {
	switch x := v.(type) {
	case int32:
		return uint64(uint32(x))
	case int64:
		return uint64(x)
	case float32:
		return uint64(math.Float32bits(x))
	case float64:
		return math.Float64bits(x)
	}
	return 0
}

func (i *wasmtimeInstance) memory() []byte {
	if i.mem == nil || i.closed {
		return nil
	}
	return i.mem.UnsafeData(i.store)
}

func (i *wasmtimeInstance) Read(offset, n uint32) ([]byte, bool) {
	m := i.memory()
	if uint64(offset)+uint64(n) > uint64(len(m)) {
		return nil, false
	}
	return append([]byte(nil), m[offset:offset+n]...), true
}

func (i *wasmtimeInstance) Write(offset uint32, data []byte) bool {
	m := i.memory()
	if uint64(offset)+uint64(len(data)) > uint64(len(m)) {
		return false
	}
	copy(m[offset:], data)
	return true
}

func (i *wasmtimeInstance) MemorySize() uint32 {
	if i.mem == nil || i.closed {
		return 0
	}
	return uint32(min(uint64(i.mem.DataSize(i.store)), math.MaxUint32))
}

func (i *wasmtimeInstance) MemoryBytes() []byte { return i.memory() }

func (i *wasmtimeInstance) Global(name string) (uint64, bool) {
	if i.closed {
		return 0, false
	}
	ex := i.instance.GetExport(i.store, name)
	if ex == nil || ex.Global() == nil {
		return 0, false
	}
	return valBits(ex.Global().Get(i.store).Get()), true
}

// Close releases the store (and with it the memory) and closes the files the guest left open.
func (i *wasmtimeInstance) Close(context.Context) error {
	if i.closed {
		return nil
	}
	i.closed = true
	var err error
	if i.wasi != nil { // nil while recycled
		err = i.wasi.Close()
	}
	i.store.Close()
	return err
}

// Recycle implements engine.Recycler: the run's files are closed and its WASI state and host dropped, memory
// goes back to the image it was mapped from (ImageMapper.ResetMapped), and every mutable global to its initial
// value. An instance whose memory grew is not recycled: wasmtime cannot shrink a memory.
func (i *wasmtimeInstance) Recycle() error {
	switch {
	case i.closed:
		return errors.New("engine: recycle: instance closed")
	case i.wasi == nil:
		return errors.New("engine: recycle: instance already recycled")
	case i.failed || i.killed || i.exited:
		return errors.New("engine: recycle: a call did not return normally")
	case i.globals == nil:
		return errors.New("engine: recycle: the module does not say how to reset its instances")
	case i.image == nil || i.mem == nil:
		return errors.New("engine: recycle: the instance's memory has no image to go back to")
	}
	err := i.wasi.Close()
	i.wasi, i.host, i.pending, i.hasResp = nil, nil, nil, false
	if err != nil {
		i.failed = true
		return fmt.Errorf("engine: recycle: closing the run's files: %w", err)
	}
	if size, image := uint64(i.mem.DataSize(i.store)), i.image.ImageSize(); size != image {
		i.failed = true
		return fmt.Errorf("engine: recycle: memory grew from %d to %d bytes", image, size)
	}
	if err := i.image.ResetMapped(i.memory()); err != nil {
		i.failed = true
		return fmt.Errorf("engine: recycle: %w", err)
	}
	for _, gr := range i.globals {
		if err := gr.g.Set(i.store, gr.initial); err != nil {
			i.failed = true
			return fmt.Errorf("engine: recycle: %w", err)
		}
	}
	return nil
}

// Reuse implements engine.Recycler.
func (i *wasmtimeInstance) Reuse(cfg engine.InstanceConfig) error {
	if i.closed || i.failed || i.wasi != nil {
		return errors.New("engine: reuse: the instance is not recycled")
	}
	w, err := engine.NewWASI(cfg)
	if err != nil {
		return err
	}
	i.wasi, i.host = w, cfg.Host
	return nil
}

var _ engine.Recycler = (*wasmtimeInstance)(nil)

// callerInstance returns the instance whose store made the host call.
func callerInstance(c *wasmtime.Caller) *wasmtimeInstance {
	inst, _ := c.Data().(*wasmtimeInstance)
	return inst
}

// callerMemory is the calling instance's linear memory, valid until the host function returns.
func (i *wasmtimeInstance) callerMemory(c *wasmtime.Caller) engine.GuestMem {
	if i.mem == nil { // during instantiation (a start function): look the memory up
		if ex := c.GetExport("memory"); ex != nil && ex.Memory() != nil {
			return ex.Memory().UnsafeData(c)
		}
		return nil
	}
	return i.mem.UnsafeData(c)
}

var (
	kindI32 = wasmtime.NewValType(wasmtime.KindI32)
	kindI64 = wasmtime.NewValType(wasmtime.KindI64)
)

func valTypes(ks ...*wasmtime.ValType) []*wasmtime.ValType { return ks }

// serve is engine.Serve over the calling instance's memory, with the trap that ends a run the host killed.
func (inst *wasmtimeInstance) serve(c *wasmtime.Caller, ptr uint32, n int32) ([]byte, bool, *wasmtime.Trap) {
	resp, isErr, kill := engine.Serve(inst.ctx, inst.host, inst.callerMemory(c), ptr, n)
	if kill {
		inst.killed = true
		return nil, false, wasmtime.NewTrap("wasmbox: run killed")
	}
	return resp, isErr, nil
}

// defineWasmbox defines the wasmbox_v1 import module (call, call_into, fetch, tick) in l.
func defineWasmbox(l *wasmtime.Linker) error {
	i32i32 := wasmtime.NewFuncType(valTypes(kindI32, kindI32), valTypes(kindI32))
	err := l.FuncNew(hostfuncs.ImportModule, hostfuncs.ImportCall, i32i32, func(c *wasmtime.Caller, a []wasmtime.Val) ([]wasmtime.Val, *wasmtime.Trap) {
		inst := callerInstance(c)
		if inst == nil || inst.host == nil {
			return []wasmtime.Val{wasmtime.ValI32(-1)}, nil
		}
		resp, isErr, trap := inst.serve(c, uint32(a[0].I32()), a[1].I32())
		if trap != nil {
			return nil, trap
		}
		inst.pending, inst.hasResp = resp, true
		return []wasmtime.Val{wasmtime.ValI32(engine.ResponseLength(resp, isErr))}, nil
	})
	if err != nil {
		return err
	}
	callInto := wasmtime.NewFuncType(valTypes(kindI32, kindI32, kindI32, kindI32), valTypes(kindI32))
	err = l.FuncNew(hostfuncs.ImportModule, hostfuncs.ImportCallInto, callInto, func(c *wasmtime.Caller, a []wasmtime.Val) ([]wasmtime.Val, *wasmtime.Trap) {
		inst := callerInstance(c)
		if inst == nil || inst.host == nil {
			return []wasmtime.Val{wasmtime.ValI32(-1)}, nil
		}
		buf, bufLen := uint32(a[2].I32()), a[3].I32()
		if bufLen < 0 {
			return []wasmtime.Val{wasmtime.ValI32(hostfuncs.CallIntoBadBuffer)}, nil
		}
		if _, ok := inst.callerMemory(c).Slice(buf, uint32(bufLen)); !ok {
			return []wasmtime.Val{wasmtime.ValI32(hostfuncs.CallIntoBadBuffer)}, nil
		}
		resp, isErr, trap := inst.serve(c, uint32(a[0].I32()), a[1].I32())
		if trap != nil {
			return nil, trap
		}
		// Sliced again: the host call may have grown the memory.
		if dst, ok := inst.callerMemory(c).Slice(buf, uint32(len(resp))); ok && len(resp) <= int(bufLen) {
			copy(dst, resp)
			inst.pending, inst.hasResp = nil, false
		} else {
			inst.pending, inst.hasResp = resp, true
		}
		return []wasmtime.Val{wasmtime.ValI32(engine.ResponseLength(resp, isErr))}, nil
	})
	if err != nil {
		return err
	}
	err = l.FuncNew(hostfuncs.ImportModule, hostfuncs.ImportFetch, i32i32, func(c *wasmtime.Caller, a []wasmtime.Val) ([]wasmtime.Val, *wasmtime.Trap) {
		inst := callerInstance(c)
		ptr, n := uint32(a[0].I32()), a[1].I32()
		if inst == nil || !inst.hasResp || n < 0 || int(n) < len(inst.pending) {
			return []wasmtime.Val{wasmtime.ValI32(-1)}, nil
		}
		dst, ok := inst.callerMemory(c).Slice(ptr, uint32(len(inst.pending)))
		if !ok {
			return []wasmtime.Val{wasmtime.ValI32(-1)}, nil
		}
		copy(dst, inst.pending)
		r := int32(len(inst.pending))
		inst.pending, inst.hasResp = nil, false
		return []wasmtime.Val{wasmtime.ValI32(r)}, nil
	})
	if err != nil {
		return err
	}
	tickType := wasmtime.NewFuncType(nil, valTypes(kindI32))
	// tick runs on the guest's goroutine (a cgo callback), so it is the one safe place to stop the run: it returns
	// a trap, which unwinds the guest to Instance.Call.
	return l.FuncNew(hostfuncs.ImportModule, hostfuncs.ImportTick, tickType, func(c *wasmtime.Caller, _ []wasmtime.Val) ([]wasmtime.Val, *wasmtime.Trap) {
		inst := callerInstance(c)
		if inst == nil || inst.host == nil {
			return []wasmtime.Val{wasmtime.ValI32(hostfuncs.TickInterval)}, nil
		}
		next, kill := inst.host.Tick(inst.ctx)
		if kill {
			inst.killed = true
			return nil, wasmtime.NewTrap("wasmbox: run killed")
		}
		return []wasmtime.Val{wasmtime.ValI32(next)}, nil
	})
}
