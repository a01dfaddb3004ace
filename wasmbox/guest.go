package wasmbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/tetratelabs/wazero/experimental/sys"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/internal/engine"
	"github.com/wasmbox/wasmbox/internal/execreq"
	"github.com/wasmbox/wasmbox/internal/handoff"
	"github.com/wasmbox/wasmbox/internal/vfs"
	"github.com/wasmbox/wasmbox/pyruntime/py"
)

// guest is one live interpreter instance: fresh per Run, long-lived in a Session.
type guest struct {
	sb     *Sandbox
	inst   engine.Instance
	ws     *Workspace
	tmp    *vfs.FS
	stdout switchWriter
	stderr switchWriter
	stdin  switchReader
	host   guestHost
	broken error // set once the instance cannot be trusted (killed, trapped, exited)
	// installed asks the next exec to clear the import caches (packages were installed since the last one).
	installed bool
	// memRefused records that the memory allocator refused to grow the guest's memory (reset per exec); only
	// engines that grow memory through the allocator (wazero) report it. It belongs to the instance's memory, so
	// a reused instance brings its own.
	memRefused *atomic.Bool
	// recycle: the guest serves one Run, and its instance may serve the next one once it is recycled
	// (Sandbox.putSpare); never for a Session's guest.
	recycle bool
	// shutdown: the next exec ends the Session's program instead of running code (Session.Close).
	shutdown bool
	// life guards the instance's end while an abandoned exec may still run (execOn): execAbandoned is set while
	// it does, closeWanted once the owner asked to close the instance meanwhile.
	life          sync.Mutex
	execAbandoned bool
	closeWanted   bool
}

// execState is the per-exec part of the host's state; it lives on the guest's goroutine only (tool calls run
// on a goroutine of their own but touch only the bridge).
type execState struct {
	bridge      *hostfuncs.Bridge
	rc          *runContext // nil while the interpreter is prepared
	softSent    bool
	firstSeen   time.Time // when the host first saw the context ended (used when rc is nil)
	interrupted bool      // the end of the run's context cut the program short (interrupt, sleep, stdin, tool)
	kill        bool      // end the run after the current host call
	exception   *PythonError
	completed   int // tool calls whose result reached the program
	// limitDenied: the gate refused a call of this program for the run's max_tool_calls (host state, unlike the
	// program's own exception report). flooded: the program kept calling after its calls were refused, and the
	// run was ended for it.
	limitDenied bool
	flooded     bool
	// halted is why the governance run ended the program (a durable task paused, or lost its store).
	halted error
	// workers runs the tool calls (callTool) when the exec runs on its caller's goroutine; closed when the exec
	// ends.
	workers handoff.Pool
	// abandonable: the exec runs on a worker of the Sandbox that its caller abandons if a host call outlasts the
	// deadline (execOn), so tool calls run on the exec's own goroutine.
	abandonable bool
	// gaveUp is closed (once, by toolAbandoned) when the gate abandoned a tool of this exec and recorded it: the
	// waiting caller (execOn) need not wait any longer.
	gaveUp     chan struct{}
	gaveUpOnce sync.Once
	// toolCtx is the context of the tools, derived from toolCtxOf (the context of the exec's host calls).
	toolCtx, toolCtxOf context.Context
	job                *toolJob // reused from call to call; nil after one was abandoned
}

// toolAbandoned is what the gate calls when it abandons a tool running on the exec's goroutine.
func (st *execState) toolAbandoned() { st.gaveUpOnce.Do(func() { close(st.gaveUp) }) }

// endedAt is when the run's context ended, as the host measured it.
func (st *execState) endedAt() time.Time {
	if st.rc != nil {
		if t := st.rc.ended(); !t.IsZero() {
			return t
		}
	}
	if st.firstSeen.IsZero() {
		st.firstSeen = time.Now()
	}
	return st.firstSeen
}

// guestHost serves the wasmbox_v1 imports for one guest.
type guestHost struct {
	g     *guest
	state *execState
	ctx   atomic.Pointer[context.Context] // the current exec's context, for Nanosleep
}

func (h *guestHost) currentCtx() context.Context {
	if p := h.ctx.Load(); p != nil {
		return *p
	}
	return context.Background()
}

// Tick runs on the guest's goroutine every hostfuncs.TickInterval loop iterations. Once the run's context has
// ended, the first Tick asks for a KeyboardInterrupt and every later one kills the run once killGrace has passed
// since the end. Nothing the guest sends changes that bound.
func (h *guestHost) Tick(ctx context.Context) (int32, bool) {
	if ctx.Err() == nil {
		return hostfuncs.TickInterval, false
	}
	st := h.state
	if st == nil {
		return 0, true
	}
	st.interrupted = true
	ended := st.endedAt()
	if !st.softSent {
		st.softSent = true
		return -1000, false // soft: KeyboardInterrupt at the next eval-breaker check
	}
	if time.Since(ended) > killGrace {
		return 0, true // hard: C-level loops, handlers, finalizers, code that swallows KeyboardInterrupt
	}
	return 1000, false
}

// KillAfterCall ends the run after a host call that the run's end cut short (engine.CallKiller).
func (h *guestHost) KillAfterCall() bool {
	st := h.state
	return st != nil && st.kill
}

type hostRequest struct {
	Op        string          `json:"op"`
	Name      string          `json:"name"`
	Args      json.RawMessage `json:"args"`
	Type      string          `json:"type"`
	Message   string          `json:"message"`
	Traceback string          `json:"traceback"`
	Line      int             `json:"line"`
	// chmod: the file by its stat's device (without the mode bits) and inode, and the new permission bits.
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
	Mode uint32 `json:"mode"`
}

// Host-side bounds of an exception report (the guest's text; the request itself is bounded by the ABI).
const (
	maxExceptionType      = 256
	maxExceptionMessage   = 64 << 10
	maxExceptionTraceback = 256 << 10
)

// Call handles one request of the guest. Tool calls arrive here too (hostfuncs).
func (h *guestHost) Call(ctx context.Context, req []byte) ([]byte, bool) {
	if len(req) > 0 && req[0] == 'T' { // the tool fast path: "T" name "\n" arguments
		name, args, ok := bytes.Cut(req[1:], []byte("\n"))
		if !ok {
			return hostfuncs.ErrorResponse("ABIError", "tool request without a newline after the name"), true
		}
		if h.state == nil || h.state.bridge == nil {
			return hostfuncs.ErrorResponse("ToolDenied", "tools cannot be called while the interpreter is prepared"), true
		}
		// Arguments that are not JSON go to the gate like any others: it refuses them, audits the refusal and
		// counts it towards the run's denied calls, so that a flood of them ends the run like any other.
		return h.callTool(ctx, name, args)
	}
	var r hostRequest
	if err := json.Unmarshal(req, &r); err != nil {
		return hostfuncs.ErrorResponse("ABIError", "request is not valid JSON: "+err.Error()), true
	}
	switch r.Op {
	case "exception":
		// Text for the Result, bounded here; it never decides how the run is classified.
		if h.state != nil {
			h.state.exception = &PythonError{
				Type:      truncateText(r.Type, maxExceptionType),
				Message:   truncateText(r.Message, maxExceptionMessage),
				Traceback: truncateText(r.Traceback, maxExceptionTraceback),
				Line:      max(r.Line, 0),
			}
		}
		return []byte("null"), false
	case "chmod":
		// WASI preview 1 has no chmod: the driver's os.chmod and os.fchmod come here. Only the run's own
		// writable file systems have modes to change; the stdlib, packages and /dev are read-only.
		errno := sys.EROFS
		if g := h.g; g != nil {
			for _, f := range []*vfs.FS{g.ws.files(), g.tmp} {
				if f != nil && f.Dev() == r.Dev {
					errno = f.ChmodIno(r.Ino, fs.FileMode(r.Mode)&fs.ModePerm)
					break
				}
			}
		}
		switch errno {
		case 0:
			return []byte(`"ok"`), false
		case sys.ENOENT:
			return []byte(`"ENOENT"`), false
		default:
			return []byte(`"EROFS"`), false
		}
	case "tool":
		if h.state == nil || h.state.bridge == nil {
			return hostfuncs.ErrorResponse("ToolDenied", "tools cannot be called while the interpreter is prepared"), true
		}
		return h.callTool(ctx, []byte(r.Name), r.Args)
	default:
		return hostfuncs.ErrorResponse("ABIError", fmt.Sprintf("unknown op %q", r.Op)), true
	}
}

// toolRecordWait is how long after the end of the run the host waits for a tool call that is still running to
// come back from the gate, so that its record is in the Result: longer than the default gate's ToolGrace
// (governance.DefaultToolGrace), and a hard bound for a gate configured without one.
const toolRecordWait = governance.DefaultToolGrace + 150*time.Millisecond

// callTool runs one tool call through the bridge on the exec's worker goroutine (internal/handoff), so that the
// run's deadline holds while a tool runs: when the run's context ends first, the host waits at most
// toolRecordWait for the call to come back, and then the run is killed. A result that arrives after the end
// never reaches the guest. The worker is reused from call to call; one that is left behind is never reused.
func (h *guestHost) callTool(ctx context.Context, name []byte, args json.RawMessage) ([]byte, bool) {
	st := h.state
	if st.toolCtxOf != ctx { // once per exec: every call of an exec gets the same context
		st.toolCtxOf, st.toolCtx = ctx, ctx
		if h.g != nil {
			st.toolCtx = withReentry(ctx, h.g.sb)
		}
		if st.abandonable {
			st.toolCtx = handoff.WithCallerAbandons(st.toolCtx, st.toolAbandoned)
		}
	}
	j := st.job
	if j == nil {
		j = &toolJob{bridge: st.bridge}
		st.job = j
	}
	j.ctx, j.name, j.args = st.toolCtx, name, args
	if st.abandonable {
		// The exec runs on a worker that Sandbox.Run abandons if this call outlasts the deadline (execOn): the
		// call runs here, and the gate runs the tool here too.
		j.Run()
	} else {
		w := st.workers.Start(ctx, j)
		select {
		case <-w.Done():
			st.workers.Put(w)
		case <-ctx.Done():
			// The answer is discarded either way; waiting for it keeps the call's record (the gate gives up on
			// a tool that ignores its context within its ToolGrace and records it as abandoned).
			wait := time.NewTimer(time.Until(st.endedAt().Add(toolRecordWait)))
			select {
			case <-w.Done():
				st.workers.Put(w)
			case <-wait.C:
				w.Abandon()
				st.job = nil // still the worker's: never touched again
			}
			wait.Stop()
		}
	}
	if ctx.Err() != nil {
		st.interrupted = true
		st.kill = true
		return hostfuncs.ErrorResponse("DeadlineExceeded", "the run's deadline passed during the tool call"), true
	}
	resp, isErr := j.resp, j.isErr
	j.resp, j.name, j.args = nil, nil, nil // keep nothing of this call alive in the exec
	if !isErr {
		st.completed++
	} else if !st.limitDenied {
		var e struct {
			Type string `json:"type"`
		}
		st.limitDenied = json.Unmarshal(resp, &e) == nil && e.Type == "ToolLimitExceeded"
	}
	if err := st.bridge.Halted(); err != nil {
		// A durable task paused at this call (or can no longer be governed): the program ends here; a resume
		// replays it up to this call.
		st.halted, st.kill = err, true
	}
	if st.bridge.Flooded() {
		// The run's calls are refused and the program keeps calling: end it instead of serving refusals until
		// its deadline.
		st.flooded, st.limitDenied, st.kill = true, true, true
	}
	return resp, isErr
}

// toolJob is one tool call for the exec's worker; an exec reuses one (its calls come one at a time).
type toolJob struct {
	bridge *hostfuncs.Bridge
	ctx    context.Context
	name   []byte // as the guest sent it: the bridge looks it up without copying it
	args   json.RawMessage
	resp   []byte
	isErr  bool
}

// Run is the worker's side of callTool: the call through the bridge, with a panic turned into a ToolError.
func (j *toolJob) Run() {
	defer func() {
		if v := recover(); v != nil {
			j.resp, j.isErr = hostfuncs.ErrorResponse("ToolError", fmt.Sprintf("tool %s failed on the host", j.name)), true
		}
	}()
	j.resp, j.isErr = j.bridge.CallBytes(j.ctx, j.name, j.args)
}

// truncateText cuts s to at most n bytes (on a UTF-8 boundary) and says how much was cut.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[wasmbox: truncated: %d more bytes]", len(s)-cut)
}

// reentryKey marks the context of a tool call with the Sandboxes whose programs it serves.
type reentryKey struct{}

type reentry struct {
	sb     *Sandbox
	parent *reentry
}

func withReentry(ctx context.Context, sb *Sandbox) context.Context {
	parent, _ := ctx.Value(reentryKey{}).(*reentry)
	return context.WithValue(ctx, reentryKey{}, &reentry{sb: sb, parent: parent})
}

// reentrant reports whether ctx is that of a tool call made by a program of s (directly or through other
// sandboxes).
func (s *Sandbox) reentrant(ctx context.Context) error {
	for r, _ := ctx.Value(reentryKey{}).(*reentry); r != nil; r = r.parent {
		if r.sb == s {
			return ErrReentrant
		}
	}
	return nil
}

// watchedAllocator records refused growth of the memories it allocates.
type watchedAllocator struct {
	inner   engine.MemoryAllocator
	refused *atomic.Bool
}

func (a watchedAllocator) Allocate(max uint64) engine.LinearMemory {
	return &watchedMemory{LinearMemory: a.inner.Allocate(max), refused: a.refused}
}

type watchedMemory struct {
	engine.LinearMemory
	refused *atomic.Bool
}

// ResetToImage forwards to the memory's own (engine.ImageMemory), so a watched memory can be recycled too.
func (m *watchedMemory) ResetToImage() error {
	im, ok := m.LinearMemory.(engine.ImageMemory)
	if !ok {
		return errors.New("wasmbox: memory has no image to go back to")
	}
	return im.ResetToImage()
}

func (m *watchedMemory) Reallocate(size uint64) []byte {
	b := m.LinearMemory.Reallocate(size)
	if b == nil {
		m.refused.Store(true)
	}
	return b
}

// watch wraps mem so that g learns of refused growth. Only for wazero, which grows memory through the
// allocator; wasmtime reads the allocator's limit and image and grows memory itself.
func (g *guest) watch(mem engine.MemoryAllocator) engine.MemoryAllocator {
	if e := g.sb.it.engine; e != "" && e != "wazero" {
		return mem
	}
	return watchedAllocator{inner: mem, refused: g.memRefused}
}

// memoryExhausted reports whether the host saw this exec reach the memory limit: the allocator refused to grow
// memory, or the peak came within 1 MiB of the limit.
func (g *guest) memoryExhausted(peak uint64) bool {
	return g.memRefused.Load() || peak+(1<<20) >= uint64(g.sb.cfg.MemoryLimit)
}

// newGuestState is a guest for ws with a fresh /tmp and the instance configuration of the fixed mount layout;
// its instance is still to be made (or reused).
func (s *Sandbox) newGuestState(ws *Workspace, packages *vfs.FS) (*guest, engine.InstanceConfig) {
	cfg := s.cfg
	g := &guest{sb: s, ws: ws, memRefused: new(atomic.Bool)}
	g.host.g = g
	now := s.clock()
	g.tmp = vfs.New(vfs.Limits{MaxBytes: cfg.WorkspaceBytes, MaxFiles: cfg.WorkspaceFiles}, vfs.WithClock(now.time))
	ic := engine.InstanceConfig{
		Stdin:  &g.stdin,
		Stdout: &g.stdout,
		Stderr: &g.stderr,
		Mounts: []engine.Mount{
			{GuestPath: guestRoot, FS: s.it.root},
			{GuestPath: guestStdlib, FS: s.it.stdlib},
			{GuestPath: guestZoneinfo, FS: s.it.zoneinfo},
			{GuestPath: guestPackages, SysFS: packages, ReadOnly: true},
			{GuestPath: guestWorkspace, SysFS: ws.files()},
			{GuestPath: guestTmp, SysFS: g.tmp},
			{GuestPath: guestDev, SysFS: vfs.Dev()}, // /dev/null; keeps no state
		},
		Walltime:  now.walltime,
		Nanotime:  now.nanotime,
		Nanosleep: g.nanosleep,
		Rand:      s.randSource(),
		Host:      &g.host,
	}
	return g, ic
}

// instantiate creates an instance of mod with a fresh /tmp and the given workspace, in the fixed mount layout.
func (s *Sandbox) instantiate(ctx context.Context, ws *Workspace, packages *vfs.FS, mod engine.Module, mem engine.MemoryAllocator) (*guest, error) {
	g, ic := s.newGuestState(ws, packages)
	ic.Memory = g.watch(mem)
	inst, err := mod.Instantiate(ctx, ic)
	if err != nil {
		if ctx.Err() != nil {
			return nil, runError(KindTimeout, ErrTimeout, ctx.Err())
		}
		return nil, runError(KindInternal, ErrInternal, err)
	}
	g.inst = inst
	return g, nil
}

// newGuest starts a fresh interpreter from the sandbox's snapshot: no initialisation runs, the memory is a
// copy-on-write view of the initialised interpreter's.
func (s *Sandbox) newGuest(ctx context.Context, ws *Workspace) (*guest, error) {
	return s.newGuestWith(ctx, ws, s.packages)
}

func (s *Sandbox) newGuestWith(ctx context.Context, ws *Workspace, packages *vfs.FS) (*guest, error) {
	return s.instantiate(ctx, ws, packages, s.snap.mod, s.snap.image.Allocator(uint64(s.cfg.MemoryLimit)))
}

// newRunGuest is newGuest for one Run: it reuses a recycled instance when the Sandbox keeps one, and marks the
// guest so that its instance is recycled after the Run.
func (s *Sandbox) newRunGuest(ctx context.Context, ws *Workspace) (*guest, error) {
	if sp, ok := s.takeSpare(); ok {
		g, ic := s.newGuestState(ws, s.packages)
		if err := sp.inst.(engine.Recycler).Reuse(ic); err == nil {
			sp.refused.Store(false)
			g.inst, g.memRefused, g.recycle = sp.inst, sp.refused, true
			return g, nil
		}
		_ = sp.inst.Close(context.WithoutCancel(ctx))
	}
	g, err := s.newGuest(ctx, ws)
	if err != nil {
		return nil, err
	}
	g.recycle = true
	return g, nil
}

// initGuest instantiates the original interpreter and initialises it (init + prepare): the state a snapshot
// captures.
func (s *Sandbox) initGuest(ctx context.Context) (*guest, error) {
	mod, err := s.it.original(ctx)
	if err != nil {
		return nil, err
	}
	g, err := s.instantiate(ctx, newWorkspace(s.cfg.WorkspaceBytes, s.cfg.WorkspaceFiles, nil), s.packages, mod,
		engine.LimitedAllocator(uint64(s.cfg.MemoryLimit)))
	if err != nil {
		return nil, err
	}
	inst := g.inst
	// Initialisation output (there should be none) goes to a bounded buffer used in error messages.
	initOut := newCapture(64<<10, nil)
	g.stdout.set(initOut)
	g.stderr.set(initOut)
	fail := func(step string, err error) (*guest, error) {
		_ = inst.Close(context.WithoutCancel(ctx))
		if ctx.Err() != nil {
			return nil, runError(KindTimeout, ErrTimeout, ctx.Err())
		}
		out, _ := initOut.result()
		if err == nil {
			err = errors.New(strings.TrimSpace(out))
		}
		return nil, runError(KindInternal, ErrInterpreter, fmt.Errorf("%s: %w", step, err))
	}
	st := &execState{}
	g.host.state = st
	g.host.ctx.Store(&ctx)
	if _, err := inst.Call(ctx, hostfuncs.ExportInitialize); err != nil {
		return fail("_initialize", err)
	}
	res, err := inst.Call(ctx, hostfuncs.ExportABIVersion)
	if err != nil {
		return fail("abi version", err)
	}
	if v := int32(res[0]); v != hostfuncs.ABIVersion {
		return fail("abi version", fmt.Errorf("interpreter speaks ABI %d, host speaks %d", v, hostfuncs.ABIVersion))
	}
	if res, err := inst.Call(ctx, hostfuncs.ExportInit); err != nil || int32(res[0]) != 0 {
		return fail("init", err)
	}
	prep := prepareSource(s.cfg.Preload, s.toolsModule)
	if rc, err := g.callWithBytes(ctx, hostfuncs.ExportPrepare, []byte(prep)); err != nil || rc != 0 {
		return fail("prepare", err)
	}
	g.host.state = nil
	g.stdout.set(nil)
	g.stderr.set(nil)
	return g, nil
}

// prepareSource installs the run driver and pre-imports modules.
func prepareSource(preload []string, toolsModule string) string {
	var b strings.Builder
	b.WriteString("import sys, types\n")
	fmt.Fprintf(&b, "m = types.ModuleType('_wasmbox_boot')\nm.__file__ = '<wasmbox_boot>'\n")
	fmt.Fprintf(&b, "exec(compile(%s, '<wasmbox_boot>', 'exec'), m.__dict__)\n", pyString(py.Boot))
	b.WriteString("sys.modules['_wasmbox_boot'] = m\nm.install()\n")
	fmt.Fprintf(&b, "t = types.ModuleType('tools')\nt.__file__ = '<wasmbox:tools>'\n")
	fmt.Fprintf(&b, "exec(compile(%s, '<wasmbox:tools>', 'exec'), t.__dict__)\nsys.modules['tools'] = t\n", pyString(toolsModule))
	b.WriteString("del m, t\n")
	for _, mod := range preload {
		fmt.Fprintf(&b, "import %s\n", mod)
	}
	// Warm the driver: CPython specializes bytecode as it runs, writing into the code objects, so a driver
	// first run after the snapshot would pay for that (and for restoring the pages it wrote) in every fresh
	// run. Runs of an empty program here leave the driver's code specialized in the snapshot.
	// The request is a default Run's, as bytes as wasmbox_exec passes it, so that the paths a run takes are warm.
	warm, _ := (&execreq.Request{Code: "pass", Filename: "<string>", Argv: []string{"<string>"}}).Marshal()
	fmt.Fprintf(&b, "for _ in range(3): sys.modules['_wasmbox_boot'].run(%s)\n", pyBytes(warm))
	// Flush stdio and freeze the heap: full collections in a run then skip the snapshot's objects instead of
	// touching (and copying) every page of it.
	b.WriteString("import gc\ngc.collect()\ngc.freeze()\nsys.stdout.flush()\nsys.stderr.flush()\n")
	return b.String()
}

// pyString quotes s as a Python string literal (JSON strings are valid Python literals).
// pyBytes returns b as a Python bytes literal.
func pyBytes(b []byte) string {
	var sb strings.Builder
	sb.WriteString("b'")
	for _, c := range b {
		fmt.Fprintf(&sb, "\\x%02x", c)
	}
	sb.WriteString("'")
	return sb.String()
}

func pyString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// callWithBytes copies data into guest memory and calls fn(ptr, len).
func (g *guest) callWithBytes(ctx context.Context, fn string, data []byte) (int32, error) {
	res, err := g.inst.Call(ctx, hostfuncs.ExportAlloc, uint64(len(data)))
	if err != nil {
		return 0, err
	}
	ptr := uint32(res[0])
	if ptr == 0 {
		return 0, fmt.Errorf("guest could not allocate %d bytes", len(data))
	}
	if !g.inst.Write(ptr, data) {
		return 0, fmt.Errorf("guest returned an invalid buffer")
	}
	res, err = g.inst.Call(ctx, fn, uint64(ptr), uint64(len(data)))
	if err != nil {
		return 0, err
	}
	if _, ferr := g.inst.Call(ctx, hostfuncs.ExportFree, uint64(ptr)); ferr != nil {
		return 0, ferr
	}
	return int32(res[0]), nil
}

func (g *guest) nanosleep(ns int64) {
	ctx := g.host.currentCtx()
	if ns <= 0 {
		return
	}
	t := time.NewTimer(time.Duration(ns))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		if st := g.host.state; st != nil {
			st.interrupted = true
		}
	}
}

func (g *guest) close(ctx context.Context) {
	g.life.Lock()
	if g.execAbandoned {
		// The abandoned exec still runs on its worker, inside a host call: the worker closes the instance once
		// the exec returns (execJob.Run).
		g.closeWanted = true
		g.life.Unlock()
		return
	}
	g.life.Unlock()
	g.closeInstance(ctx)
}

func (g *guest) closeInstance(ctx context.Context) {
	if g.inst != nil && g.recycle && g.broken == nil && g.sb.putSpare(g.inst, g.memRefused) {
		g.inst = nil
		return
	}
	if g.inst != nil {
		_ = g.inst.Close(context.WithoutCancel(ctx))
		g.inst = nil
	}
}

// execOn runs the exec request in g. With tools in the sandbox it runs it on a worker of the Sandbox and waits for
// it or for the run's end plus toolRecordWait, whichever comes first: a tool call then runs on the exec's own
// goroutine, with no handoff per call, and a host call that never returns (a tool that ignores its context, a
// policy, approver or auditor that hangs) still cannot hold Run past its deadline. It reports abandoned when it
// gave up on the exec; the worker then runs cleanup and closes the instance if its owner asked to (close) once
// the exec returns, and the caller must not touch g's exec state again. Without tools it runs the exec here, as
// there is no host call that can outlast the run (tool calls still get their own worker then: callTool).
func (g *guest) execOn(ctx context.Context, runCtx *runContext, st *execState, req []byte, cleanup func()) (int32, error, bool) {
	if !g.sb.toolsOnExec {
		rc, err := g.callWithBytes(ctx, hostfuncs.ExportExec, req)
		return rc, err, false
	}
	st.abandonable, st.gaveUp = true, make(chan struct{})
	j := &execJob{g: g, ctx: ctx, req: req, cleanup: cleanup}
	w := g.sb.execWorkers.Start(context.WithoutCancel(ctx), j) // the worker outlives ctx; its trace values stay
	select {
	case <-w.Done():
		g.sb.execWorkers.Put(w)
		return j.rc, j.err, false
	case <-runCtx.Done():
	}
	wait := time.NewTimer(time.Until(st.endedAt().Add(toolRecordWait)))
	defer wait.Stop()
	select {
	case <-w.Done():
		g.sb.execWorkers.Put(w)
		return j.rc, j.err, false
	case <-wait.C:
	case <-st.gaveUp: // the gate abandoned the tool after its ToolGrace, and recorded it
	}
	g.life.Lock()
	g.execAbandoned = j.state.CompareAndSwap(execRunning, execAbandoned)
	g.life.Unlock()
	if !g.execAbandoned { // it returned just now
		<-w.Done()
		g.sb.execWorkers.Put(w)
		return j.rc, j.err, false
	}
	w.Abandon()
	return 0, nil, true
}

// The states of an exec run by a worker (execOn): the worker and the waiting caller each try to move it out of
// running, and only one of them can.
const (
	execRunning int32 = iota
	execFinished
	execAbandoned
)

// execJob is one exec on a worker of the Sandbox.
type execJob struct {
	g       *guest
	ctx     context.Context
	req     []byte
	cleanup func()
	state   atomic.Int32
	rc      int32
	err     error
}

// Run is the worker's side of execOn: the exec, then, if the caller gave up on it meanwhile, what the caller
// would have done: cleanup, and closing the instance if the caller already asked to.
func (j *execJob) Run() {
	func() {
		defer func() {
			if v := recover(); v != nil { // a bug on the host side: an error of this run, not a crash of the process
				j.rc, j.err = -1, fmt.Errorf("wasmbox: the run panicked on the host: %v", v)
			}
		}()
		j.rc, j.err = j.g.callWithBytes(j.ctx, hostfuncs.ExportExec, j.req)
	}()
	if j.state.CompareAndSwap(execRunning, execFinished) {
		return
	}
	g := j.g
	j.cleanup()
	g.life.Lock()
	g.execAbandoned = false
	closeNow := g.closeWanted
	g.life.Unlock()
	if closeNow {
		g.closeInstance(context.WithoutCancel(j.ctx))
	}
}

// exec runs one program in g. It returns a Result even when it also returns an error (partial output, the
// traceback of an interrupted program). Every classification of the outcome comes from the host's own state:
// its context, the engine's error, the allocator, the gate's records. The guest's exception report is text.
func (g *guest) exec(ctx context.Context, p Program, session bool) (*Result, error) {
	cfg := g.sb.cfg
	start := time.Now()
	timeout := cfg.Timeout
	if p.timeout > 0 {
		timeout = p.timeout
	}
	runCtx := newRunContext(ctx, timeout)
	defer runCtx.cancel()
	ctx = governance.WithDeadlinePauser(runCtx, runCtx)
	stdout := newCapture(cfg.StdoutLimit, firstWriter(p.Stdout, cfg.Stdout))
	stderr := newCapture(cfg.StderrLimit, firstWriter(p.Stderr, cfg.Stderr))
	g.stdout.set(stdout)
	g.stderr.set(stderr)
	run := p.Governance
	if run == nil {
		run = cfg.Gate.NewRun("")
	}
	st := &execState{bridge: hostfuncs.NewBridge(cfg.Tools, run, governance.SourcePython), rc: runCtx}
	if p.Stdin != nil {
		g.stdin.set(newStdinPump(ctx, p.Stdin, cfg.StdinLimit, func() { st.interrupted = true }))
	}
	// What ends the exec's use of g; the exec's worker does it instead when the exec was abandoned (execOn).
	cleanup := func() {
		g.stdout.set(nil)
		g.stderr.set(nil)
		g.stdin.set(nil)
		g.host.state = nil
		st.workers.Close()
	}
	g.host.state = st
	g.host.ctx.Store(&ctx)
	g.memRefused.Store(false)
	g.ws.files().Mark()

	filename := p.Filename
	if filename == "" {
		filename = "<string>"
	}
	argv := p.Args
	if len(argv) == 0 {
		argv = []string{filename}
	}
	req, err := (&execreq.Request{Code: p.Code, Filename: filename, Argv: argv, Env: cfg.Env, Session: session, Invalidate: g.installed, Shutdown: g.shutdown}).Marshal()
	if err != nil { // a string of 2 GiB or more
		cleanup()
		return &Result{ExitCode: -1, Workspace: g.ws}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	g.installed = false
	rc, err, abandoned := g.execOn(ctx, runCtx, st, req, cleanup)
	if abandoned {
		// A host call (a tool, or a part of the gate) has not returned since the deadline: the exec's goroutine is
		// left to it and this run ends now, with what the host can read without that goroutine.
		g.broken = ErrSessionBroken
		res := &Result{ExitCode: -1, Workspace: g.ws, ToolCalls: st.bridge.Abandon(), RunID: st.bridge.RunID()}
		res.Stdout, res.StdoutTruncated = stdout.result()
		res.Stderr, res.StderrTruncated = stderr.result()
		res.FilesChanged, res.FilesChangedTotal = g.ws.changesN(MaxFilesChanged)
		res.Duration = time.Since(start)
		return res, runError(KindTimeout, ErrTimeout, runCtx.Err())
	}
	cleanup()

	res := &Result{ExitCode: int(rc), Workspace: g.ws, ToolCalls: st.bridge.Calls(), ToolCallsCompleted: st.completed,
		RunID: st.bridge.RunID()}
	res.Stdout, res.StdoutTruncated = stdout.result()
	res.Stderr, res.StderrTruncated = stderr.result()
	res.FilesChanged, res.FilesChangedTotal = g.ws.changesN(MaxFilesChanged)
	res.PeakMemory = engine.PeakMemory(g.inst)
	res.Duration = time.Since(start)

	killed := errors.Is(err, engine.ErrKilled)
	var ee *engine.ExitError
	switch {
	case runCtx.Err() != nil && (killed || st.interrupted || err != nil):
		// The deadline (or the caller) ended the run, whatever the program was doing: one outcome.
		if err != nil {
			g.broken = ErrSessionBroken
		}
		res.ExitCode = -1
		res.Exception = st.exception
		return res, runError(KindTimeout, ErrTimeout, runCtx.Err())
	case killed && st.halted != nil:
		g.broken = ErrSessionBroken
		res.ExitCode = -1
		if errors.Is(st.halted, governance.ErrPaused) {
			return res, runError(KindPaused, ErrPaused, st.halted)
		}
		return res, runError(KindGovernance, ErrGovernance, st.halted)
	case killed && st.flooded:
		g.broken = ErrSessionBroken
		res.ExitCode = -1
		return res, runError(KindToolLimit, ErrToolLimit, errCallFlood)
	case killed:
		g.broken = ErrSessionBroken
		res.ExitCode = -1
		return res, runError(KindInternal, ErrInternal, err)
	case errors.As(err, &ee):
		g.broken = ErrSessionBroken // os._exit: the interpreter is gone
		res.ExitCode = int(ee.Code)
		return res, nil
	case err != nil:
		g.broken = ErrSessionBroken
		res.ExitCode = -1
		if g.memoryExhausted(res.PeakMemory) {
			return res, runError(KindMemory, ErrMemoryLimit, err)
		}
		return res, runError(KindInternal, ErrInternal, err)
	}
	if res.ExitCode == 0 {
		return res, nil // a report from a program that then ended normally is not its outcome
	}
	res.Exception = st.exception
	if exc := res.Exception; exc != nil {
		if exc.Type == "ToolLimitExceeded" && st.limitDenied {
			return res, runError(KindToolLimit, ErrToolLimit, exc)
		}
		if exc.Type == "MemoryError" && g.memoryExhausted(res.PeakMemory) {
			return res, runError(KindMemory, ErrMemoryLimit, exc)
		}
		if cfg.ExceptionAsError {
			return res, runError(KindPython, ErrPython, exc)
		}
	}
	return res, nil
}

// errCallFlood is the cause of a run ended for calling tools after the gate refused them.
var errCallFlood = fmt.Errorf("the program kept calling tools after they were refused: %w", governance.ErrCallFlood)

func firstWriter(ws ...io.Writer) io.Writer {
	for _, w := range ws {
		if w != nil {
			return w
		}
	}
	return nil
}

// clock is one run's view of time.
type clock struct {
	time     func() time.Time
	walltime func() (int64, int32)
	nanotime func() int64
}

func (s *Sandbox) clock() clock {
	if !s.cfg.Deterministic {
		start := time.Now()
		return clock{
			time:     time.Now,
			walltime: func() (int64, int32) { t := time.Now(); return t.Unix(), int32(t.Nanosecond()) },
			nanotime: func() int64 { return int64(time.Since(start)) },
		}
	}
	// A fake clock that advances 1 µs per reading: deterministic, and still monotonic for code that measures.
	var ticks atomic.Int64
	base := s.cfg.Time
	cur := func() time.Time { return base.Add(time.Duration(ticks.Add(1)) * time.Microsecond) }
	return clock{
		time:     cur,
		walltime: func() (int64, int32) { t := cur(); return t.Unix(), int32(t.Nanosecond()) },
		nanotime: func() int64 { return int64(cur().Sub(base)) },
	}
}

func (s *Sandbox) randSource() io.Reader {
	if !s.cfg.Deterministic {
		return rand.Reader
	}
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], uint64(s.cfg.Seed))
	return mrand.NewChaCha8(seed)
}
