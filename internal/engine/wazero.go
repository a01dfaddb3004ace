package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/internal/wasmbin"
)

// killExitCode marks an ExitError raised by our own hard kill (never by the guest: proc_exit codes are < 256).
const killExitCode = 0xDEAD

// WazeroConfig configures the wazero engine.
type WazeroConfig struct {
	// CacheDir is the on-disk compilation cache; empty means no disk cache (in-memory only).
	CacheDir string
}

type wazeroEngine struct {
	rt    wazero.Runtime
	cache wazero.CompilationCache
}

// NewWazero creates a wazero runtime with WASI preview 1 (this package's) and the wasmbox host module. Memory limits are enforced
// per instance by the MemoryAllocator, so one runtime serves sandboxes with different limits.
func NewWazero(ctx context.Context, cfg WazeroConfig) (Engine, error) {
	rc := wazero.NewRuntimeConfigCompiler()
	var cache wazero.CompilationCache
	if cfg.CacheDir != "" {
		c, err := wazero.NewCompilationCacheWithDir(cfg.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("engine: compilation cache %s: %w", cfg.CacheDir, err)
		}
		cache = c
		rc = rc.WithCompilationCache(c)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	// Our own WASI (wasi.go), not wazero's: its state is the instance's *WASI, not wazero's.
	if err := defineWazeroWASI(ctx, rt); err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("engine: WASI: %w", err)
	}
	_, err := rt.NewHostModuleBuilder(hostfuncs.ImportModule).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostCall),
		[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}).Export(hostfuncs.ImportCall).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostFetch),
		[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}).Export(hostfuncs.ImportFetch).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostCallInto),
		[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}).Export(hostfuncs.ImportCallInto).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostTick),
		nil, []api.ValueType{api.ValueTypeI32}).Export(hostfuncs.ImportTick).
		Instantiate(ctx)
	if err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("engine: host module: %w", err)
	}
	return &wazeroEngine{rt: rt, cache: cache}, nil
}

func (e *wazeroEngine) Compile(ctx context.Context, wasm []byte) (Module, error) {
	var cm wazero.CompiledModule
	var err error
	withHugeCode(func() { cm, err = e.rt.CompileModule(ctx, wasm) }) // its code region in huge pages (hugecode_linux.go)
	if err != nil {
		return nil, fmt.Errorf("engine: compile: %w", err)
	}
	names, ok := wasmbin.ResetGlobals(wasm)
	return &wazeroModule{rt: e.rt, cm: cm, resettable: ok, resetGlobals: names}, nil
}

func (e *wazeroEngine) Close(ctx context.Context) error {
	err := e.rt.Close(ctx)
	if e.cache != nil {
		err = errors.Join(err, e.cache.Close(ctx))
	}
	return err
}

type wazeroModule struct {
	rt wazero.Runtime
	cm wazero.CompiledModule
	// resettable: the module carries wasmbin.ResetSection, whose names are resetGlobals.
	resettable   bool
	resetGlobals []string
}

func (m *wazeroModule) ExportedFunctions() []string {
	var names []string
	for name := range m.cm.ExportedFunctions() {
		names = append(names, name)
	}
	return names
}

func (m *wazeroModule) Close(ctx context.Context) error { return m.cm.Close(ctx) }

func (m *wazeroModule) Instantiate(ctx context.Context, cfg InstanceConfig) (Instance, error) {
	w, err := NewWASI(cfg)
	if err != nil {
		return nil, err
	}
	mc := wazero.NewModuleConfig().
		WithName(""). // anonymous: many instances of one module may live in one runtime
		WithStartFunctions()
	inst := &wazeroInstance{host: cfg.Host, wasi: w}
	ictx := ctx
	if cfg.Memory != nil {
		ictx = experimental.WithMemoryAllocator(ctx, experimental.MemoryAllocatorFunc(func(_, max uint64) experimental.LinearMemory {
			inst.mem = cfg.Memory.Allocate(max)
			return inst.mem
		}))
	}
	ictx = context.WithValue(ictx, instanceKey{}, inst)
	mod, err := m.rt.InstantiateModule(ictx, m.cm, mc)
	if err != nil {
		_ = w.Close()
		if inst.mem != nil {
			inst.mem.Free()
		}
		return nil, fmt.Errorf("engine: instantiate: %w", err)
	}
	inst.mod = mod
	if m.resettable {
		inst.globals = make([]globalReset, 0, len(m.resetGlobals))
		for _, name := range m.resetGlobals {
			g, ok := mod.ExportedGlobal(name).(api.MutableGlobal)
			if !ok {
				inst.globals = nil // not what the section promised: never recycle
				break
			}
			inst.globals = append(inst.globals, globalReset{g: g, initial: g.Get()})
		}
	}
	return inst, nil
}

// globalReset is a mutable global and the value it had when its instance was instantiated.
type globalReset struct {
	g       api.MutableGlobal
	initial uint64
}

// instanceKey carries the *wazeroInstance to the host functions (they are shared by every instance).
type instanceKey struct{}

type wazeroInstance struct {
	mod  api.Module
	host Host
	mem  LinearMemory
	wasi *WASI
	// failed is set by the first Call that did not return normally (a trap, proc_exit, a kill): the guest's state
	// is then whatever it was when it stopped, so the instance takes no further calls.
	failed bool
	// globals are the instance's mutable globals with their initial values; nil if the module cannot be reset
	// (then the instance is never recycled).
	globals []globalReset
	// funcs caches the exported functions called so far (calls are sequential: never two at once).
	funcs map[string]api.Function

	mu      sync.Mutex // guards pending against a buggy re-entrant guest; calls are otherwise sequential
	pending []byte
	// pendingSet says whether pending holds a response (written under mu; read without it by drop, which
	// then has nothing to do).
	pendingSet atomic.Bool
	killed     bool
}

func (i *wazeroInstance) Call(ctx context.Context, name string, params ...uint64) ([]uint64, error) {
	if i.mod == nil {
		return nil, errors.New("engine: instance closed")
	}
	if i.failed {
		return nil, errors.New("engine: instance unusable after a failed call")
	}
	if i.wasi == nil {
		return nil, errors.New("engine: instance recycled and not reused")
	}
	fn := i.funcs[name]
	if fn == nil {
		if fn = i.mod.ExportedFunction(name); fn == nil {
			return nil, fmt.Errorf("engine: no exported function %q", name)
		}
		if i.funcs == nil {
			i.funcs = map[string]api.Function{}
		}
		i.funcs[name] = fn // each keeps its call stack, grown once rather than per call
	}
	res, err := fn.Call(context.WithValue(ctx, instanceKey{}, i), params...)
	if err != nil {
		i.failed = true
		var ee *sys.ExitError
		if errors.As(err, &ee) {
			if i.killed && ee.ExitCode() == killExitCode {
				return nil, ErrKilled
			}
			return nil, &ExitError{Code: ee.ExitCode()}
		}
		return nil, fmt.Errorf("engine: %s: %w", name, err)
	}
	return res, nil
}

func (i *wazeroInstance) Read(offset, n uint32) ([]byte, bool) {
	b, ok := i.mod.Memory().Read(offset, n)
	if !ok {
		return nil, false
	}
	return append([]byte(nil), b...), true
}

func (i *wazeroInstance) Write(offset uint32, data []byte) bool {
	return i.mod.Memory().Write(offset, data)
}

func (i *wazeroInstance) MemorySize() uint32 { return i.mod.Memory().Size() }

func (i *wazeroInstance) MemoryBytes() []byte {
	b, _ := i.mod.Memory().Read(0, i.mod.Memory().Size())
	return b
}

func (i *wazeroInstance) Global(name string) (uint64, bool) {
	g := i.mod.ExportedGlobal(name)
	if g == nil {
		return 0, false
	}
	return g.Get(), true
}

// PeakMemory reports the largest linear memory size reached, if the allocator tracks it.
func PeakMemory(inst Instance) uint64 {
	if wi, ok := inst.(*wazeroInstance); ok {
		if wi.mem != nil {
			return wi.mem.Peak()
		}
		return uint64(wi.MemorySize())
	}
	return uint64(inst.MemorySize())
}

// Close closes the module (the runtime frees its memory: LinearMemory.Free) and the files the guest left open.
func (i *wazeroInstance) Close(ctx context.Context) error {
	if i.mod == nil {
		return nil
	}
	err := i.mod.Close(ctx)
	if i.wasi != nil {
		err = errors.Join(err, i.wasi.Close())
	}
	i.mod, i.wasi = nil, nil
	return err
}

// Recycle implements Recycler.
func (i *wazeroInstance) Recycle() error {
	switch {
	case i.mod == nil:
		return errors.New("engine: recycle: instance closed")
	case i.wasi == nil:
		return errors.New("engine: recycle: instance already recycled")
	case i.failed:
		return errors.New("engine: recycle: a call did not return normally")
	case i.globals == nil:
		return errors.New("engine: recycle: the module does not say how to reset its instances")
	}
	mem, ok := i.mem.(ImageMemory)
	if !ok {
		return errors.New("engine: recycle: the instance's memory has no image to go back to")
	}
	err := i.wasi.Close()
	i.wasi, i.host = nil, nil
	i.drop()
	i.killed = false
	if err != nil {
		i.failed = true
		return fmt.Errorf("engine: recycle: closing the run's files: %w", err)
	}
	if err := mem.ResetToImage(); err != nil {
		i.failed = true
		return fmt.Errorf("engine: recycle: %w", err)
	}
	for _, gr := range i.globals {
		gr.g.Set(gr.initial)
	}
	return nil
}

// Reuse implements Recycler.
func (i *wazeroInstance) Reuse(cfg InstanceConfig) error {
	if i.mod == nil || i.failed || i.wasi != nil {
		return errors.New("engine: reuse: the instance is not recycled")
	}
	w, err := NewWASI(cfg)
	if err != nil {
		return err
	}
	i.wasi, i.host = w, cfg.Host
	return nil
}

func instanceFrom(ctx context.Context) *wazeroInstance {
	inst, _ := ctx.Value(instanceKey{}).(*wazeroInstance)
	return inst
}

// hostCall implements call(req_ptr, req_len) -> i32.
func hostCall(ctx context.Context, mod api.Module, stack []uint64) {
	inst := instanceFrom(ctx)
	if inst == nil || inst.host == nil {
		stack[0] = api.EncodeI32(-1) // nothing to fetch: the guest sees an empty error
		return
	}
	resp, isErr := inst.serve(ctx, mod, api.DecodeU32(stack[0]), api.DecodeI32(stack[1]))
	inst.keep(resp)
	stack[0] = api.EncodeI32(ResponseLength(resp, isErr))
}

// hostCallInto implements call_into(req_ptr, req_len, buf_ptr, buf_len) -> i32: call, with a response that fits
// written into the guest's buffer rather than kept for fetch.
func hostCallInto(ctx context.Context, mod api.Module, stack []uint64) {
	inst := instanceFrom(ctx)
	if inst == nil || inst.host == nil {
		stack[0] = api.EncodeI32(-1)
		return
	}
	buf, bufLen := api.DecodeU32(stack[2]), api.DecodeI32(stack[3])
	mem := mod.Memory()
	if bufLen < 0 || uint64(buf)+uint64(bufLen) > uint64(mem.Size()) {
		stack[0] = api.EncodeI32(hostfuncs.CallIntoBadBuffer)
		return
	}
	resp, isErr := inst.serve(ctx, mod, api.DecodeU32(stack[0]), api.DecodeI32(stack[1]))
	if len(resp) <= int(bufLen) && mem.Write(buf, resp) {
		inst.drop() // delivered: nothing left to fetch
	} else {
		inst.keep(resp)
	}
	stack[0] = api.EncodeI32(ResponseLength(resp, isErr))
}

// keep makes resp the instance's pending response, for fetch.
func (i *wazeroInstance) keep(resp []byte) {
	i.mu.Lock()
	i.pending = resp
	i.pendingSet.Store(true)
	i.mu.Unlock()
}

// drop forgets the pending response, if any.
func (i *wazeroInstance) drop() {
	if !i.pendingSet.Load() {
		return // the common case: the last response was delivered too
	}
	i.mu.Lock()
	i.pending = nil
	i.pendingSet.Store(false)
	i.mu.Unlock()
}

// serve is Serve over the calling module's memory; a run the host killed ends here (a panic wazero turns into
// the guest's exit).
func (i *wazeroInstance) serve(ctx context.Context, mod api.Module, ptr uint32, n int32) ([]byte, bool) {
	mem := mod.Memory()
	buf, _ := mem.Read(0, mem.Size())
	resp, isErr, kill := Serve(ctx, i.host, buf, ptr, n)
	if kill {
		i.killed = true
		panic(sys.NewExitError(killExitCode))
	}
	return resp, isErr
}

// hostFetch implements fetch(buf_ptr, buf_len) -> i32.
func hostFetch(ctx context.Context, mod api.Module, stack []uint64) {
	inst := instanceFrom(ctx)
	ptr, n := api.DecodeU32(stack[0]), api.DecodeI32(stack[1])
	if inst == nil {
		stack[0] = api.EncodeI32(-1)
		return
	}
	inst.mu.Lock()
	defer inst.mu.Unlock()
	resp := inst.pending
	if !inst.pendingSet.Load() || n < 0 || int(n) < len(resp) || !mod.Memory().Write(ptr, resp) {
		stack[0] = api.EncodeI32(-1)
		return
	}
	inst.pending = nil
	inst.pendingSet.Store(false)
	stack[0] = api.EncodeI32(int32(len(resp)))
}

// hostTick implements tick() -> i32. It runs on the guest's goroutine, so it is the one safe place to decide to
// stop the run; each call is also a preemption point for the Go scheduler and GC.
func hostTick(ctx context.Context, mod api.Module, stack []uint64) {
	inst := instanceFrom(ctx)
	if inst == nil || inst.host == nil {
		stack[0] = api.EncodeI32(hostfuncs.TickInterval)
		return
	}
	next, kill := inst.host.Tick(ctx)
	if kill {
		inst.killed = true
		panic(sys.NewExitError(killExitCode))
	}
	stack[0] = api.EncodeI32(next)
}

// wasiENosysErrno is wasip1's ENOSYS, for a WASI call with no instance behind it.
const wasiENosysErrno = 52

// defineWazeroWASI instantiates this package's wasi_snapshot_preview1 in rt. Each function finds its instance's
// *WASI through the call's context, like the wasmbox host module.
func defineWazeroWASI(ctx context.Context, rt wazero.Runtime) error {
	b := rt.NewHostModuleBuilder(WASIModule)
	for _, d := range WASIFunctions() {
		params := make([]api.ValueType, len(d.Params))
		for k, c := range d.Params {
			params[k] = api.ValueTypeI32
			if c == 'I' {
				params[k] = api.ValueTypeI64
			}
		}
		call, n := d.Call, len(d.Params)
		b = b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
			inst := instanceFrom(ctx)
			if inst == nil || inst.wasi == nil {
				stack[0] = wasiENosysErrno
				return
			}
			mem := mod.Memory()
			buf, _ := mem.Read(0, mem.Size())
			stack[0] = uint64(call(inst.wasi, buf, stack[:n]))
		}), params, []api.ValueType{api.ValueTypeI32}).Export(d.Name)
	}
	// proc_exit unwinds the guest to Instance.Call, which reports an ExitError; the instance then takes no more
	// calls (failed).
	b = b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, stack []uint64) {
		panic(sys.NewExitError(uint32(stack[0])))
	}), []api.ValueType{api.ValueTypeI32}, nil).Export(WASIProcExit)
	_, err := b.Instantiate(ctx)
	return err
}
