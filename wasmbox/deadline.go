package wasmbox

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// killGrace is how long any code of a program may still run after its deadline (or its caller's context) has
// ended: Python code gets a KeyboardInterrupt at once, and whatever is still running killGrace after the end is
// killed, whatever the program sends or does (exception handlers, finalizers, a tool call that does not return).
// The host alone measures it, from the moment the run's context ended.
const killGrace = 40 * time.Millisecond

// runContext is the context of one exec. It ends when the program has used up its time (Config.Timeout) or when
// the caller's context ends, whichever is first. Its clock can be paused (governance.DeadlinePauser): the gate
// pauses it while a human decides on an approval, so that the program's time measures the program and its tools.
// A pause never outlives the caller's context, and the gate bounds each one by its approval timeout.
type runContext struct {
	parent context.Context
	done   chan struct{}
	err    atomic.Pointer[error]
	stop   func() bool // detaches from the parent

	mu      sync.Mutex
	left    time.Duration // program time left as of since
	since   time.Time     // when the clock last started; zero while paused
	pauses  int
	gen     int // invalidates timer callbacks of earlier starts
	timer   *time.Timer
	endedAt time.Time
}

func newRunContext(parent context.Context, timeout time.Duration) *runContext {
	rc := &runContext{parent: parent, done: make(chan struct{}), left: timeout, since: time.Now()}
	rc.mu.Lock()
	rc.startTimerLocked()
	rc.mu.Unlock()
	rc.stop = context.AfterFunc(parent, func() { rc.end(parent.Err()) })
	return rc
}

// startTimerLocked arms the timer for the time left.
func (rc *runContext) startTimerLocked() {
	rc.gen++
	gen := rc.gen
	if rc.timer != nil {
		rc.timer.Stop()
	}
	rc.timer = time.AfterFunc(max(rc.left, 0), func() {
		rc.mu.Lock()
		current := gen == rc.gen
		rc.mu.Unlock()
		if current {
			rc.end(context.DeadlineExceeded)
		}
	})
}

// end ends the context with err (first caller wins).
func (rc *runContext) end(err error) {
	if err == nil {
		err = context.Canceled
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.err.Load() != nil {
		return
	}
	rc.endedAt = time.Now()
	rc.gen++
	if rc.timer != nil {
		rc.timer.Stop()
	}
	rc.err.Store(&err)
	close(rc.done)
}

// cancel releases the context's resources; it ends the context if it has not ended.
func (rc *runContext) cancel() {
	rc.stop()
	rc.end(context.Canceled)
}

// ended returns when the context ended (the zero time if it has not).
func (rc *runContext) ended() time.Time {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.endedAt
}

// PauseDeadline stops the program's clock until the returned function is called (governance.DeadlinePauser).
// Pauses nest; the caller's context keeps running.
func (rc *runContext) PauseDeadline() (resume func()) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.err.Load() != nil {
		return func() {}
	}
	rc.pauses++
	if rc.pauses == 1 {
		rc.left -= time.Since(rc.since)
		rc.since = time.Time{}
		rc.gen++
		rc.timer.Stop()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			rc.mu.Lock()
			defer rc.mu.Unlock()
			rc.pauses--
			if rc.pauses == 0 && rc.err.Load() == nil {
				rc.since = time.Now()
				rc.startTimerLocked()
			}
		})
	}
}

// Deadline is when the program's time runs out if its clock is not paused again (or the caller's deadline, if
// earlier). While paused, only the caller's deadline applies.
func (rc *runContext) Deadline() (time.Time, bool) {
	pd, pok := rc.parent.Deadline()
	rc.mu.Lock()
	paused, d := rc.pauses > 0, rc.since.Add(rc.left)
	rc.mu.Unlock()
	if paused || (pok && pd.Before(d)) {
		return pd, pok
	}
	return d, true
}

func (rc *runContext) Done() <-chan struct{} { return rc.done }

func (rc *runContext) Err() error {
	if p := rc.err.Load(); p != nil {
		return *p
	}
	return nil
}

func (rc *runContext) Value(key any) any { return rc.parent.Value(key) }
