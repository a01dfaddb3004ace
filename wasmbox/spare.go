package wasmbox

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/wasmbox/wasmbox/internal/engine"
)

// spares are recycled instances of finished Runs, kept for the next Runs of the same Sandbox: a Run that takes
// one skips instantiation (most of a fresh run's cost). Recycling returns the instance to the state it was
// instantiated in (engine.Recycler): linear memory back to the snapshot image, every mutable global back to its
// initial value, the run's files closed and its WASI state and host dropped. Anything it cannot prove
// (a call that did not return normally, memory that grew, an engine or module that cannot say) means the
// instance is closed instead.
type spares struct {
	mu     sync.Mutex
	closed bool
	list   []spare
}

type spare struct {
	inst    engine.Instance
	refused *atomic.Bool // the memory's refused-growth flag (watchedMemory), reset when the spare is taken
}

// maxSpares bounds the idle instances one Sandbox keeps: as many as Runs can make progress at once.
var maxSpares = runtime.GOMAXPROCS(0)

// takeSpare returns an idle recycled instance, if the Sandbox has one.
func (s *Sandbox) takeSpare() (spare, bool) {
	s.spares.mu.Lock()
	defer s.spares.mu.Unlock()
	n := len(s.spares.list)
	if n == 0 || s.spares.closed {
		return spare{}, false
	}
	sp := s.spares.list[n-1]
	s.spares.list[n-1] = spare{}
	s.spares.list = s.spares.list[:n-1]
	return sp, true
}

// putSpare recycles inst and keeps it for a later Run. It reports false when it did not keep it: the caller
// must then close inst.
func (s *Sandbox) putSpare(inst engine.Instance, refused *atomic.Bool) bool {
	r, ok := inst.(engine.Recycler)
	if !ok || s.closed.Load() {
		return false
	}
	s.spares.mu.Lock()
	full := s.spares.closed || len(s.spares.list) >= maxSpares
	s.spares.mu.Unlock()
	if full || r.Recycle() != nil {
		return false
	}
	s.spares.mu.Lock()
	defer s.spares.mu.Unlock()
	if s.spares.closed || len(s.spares.list) >= maxSpares {
		return false
	}
	s.spares.list = append(s.spares.list, spare{inst: inst, refused: refused})
	return true
}

// closeSpares closes every idle instance; later ones are closed, not kept.
func (s *Sandbox) closeSpares(ctx context.Context) {
	s.spares.mu.Lock()
	list := s.spares.list
	s.spares.list, s.spares.closed = nil, true
	s.spares.mu.Unlock()
	for _, sp := range list {
		_ = sp.inst.Close(context.WithoutCancel(ctx))
	}
}
