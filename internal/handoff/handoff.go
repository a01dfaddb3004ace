// Package handoff runs functions on a reused goroutine, so that a caller can stop waiting for one (a deadline
// passed) without starting a goroutine per call.
//
// Starting a goroutine for every call costs a newproc, a stack that grows from 8 KiB by copying, and a channel
// each way; on the tool-call path that was most of the host's share of a call. A [Pool] keeps at most one idle
// goroutine, whose stack has already grown, and hands it each job through a channel. A caller that gives up on
// a job calls [Worker.Abandon]: the worker finishes the job (Go code cannot be stopped), then exits instead of
// serving again, so an abandoned job can never delay a later one.
//
// An idle worker exits when the context of its last job ends, when its pool is closed, or at the latest two
// IdleTimeouts after its last job; a pool therefore holds no goroutine for long once its owner stops calling.
//
// A job's context can also say that the goroutine running it will itself be abandoned when the context ends
// ([WithCallerAbandons]): code called from it may then run on that goroutine what it would otherwise hand to a
// worker. The sandbox runs each program on a worker this way, so its tool calls need no handoff of their own.
package handoff

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// IdleTimeout is the period of the idle check: a worker that started no job during a whole period, and is idle
// in its pool, exits (so an unused worker lives between one and two periods).
const IdleTimeout = time.Second

var idleTimeout atomic.Int64 // nanoseconds, zero for IdleTimeout; tests shorten it

func idleFor() time.Duration {
	if d := idleTimeout.Load(); d > 0 {
		return time.Duration(d)
	}
	return IdleTimeout
}

// Job is what a worker runs. A pointer to a struct makes a Job without an allocation of its own.
type Job interface{ Run() }

// Func adapts a function to Job.
type Func func()

// Run calls f().
func (f Func) Run() { f() }

// Pool hands jobs to a reused goroutine. Its zero value is ready to use. A Pool is safe for concurrent use;
// concurrent jobs each get a worker of their own, and only one idle worker is kept.
type Pool struct {
	mu     sync.Mutex
	idle   *Worker
	closed bool
}

// Worker is one goroutine of a Pool, lent to one caller at a time by [Pool.Start].
type Worker struct {
	p      *Pool
	jobs   chan Job
	done   chan struct{} // one token per finished job
	lost   atomic.Bool   // abandoned: exit after the current job
	served atomic.Int64  // jobs started, read by the idle check
	seen   int64         // served at the previous idle check (the idle check's own)
	idle   *time.Timer
	// The context whose end retires the worker when it is idle: its Done channel and the AfterFunc's stop.
	// Only the caller holding the worker touches them (and the worker, once its job channel is closed).
	watched   <-chan struct{}
	stopWatch func() bool
}

// Start runs job on an idle worker of p (or a new one) and returns that worker. The caller must then either
// wait on Done and give the worker back with [Pool.Put], or give up with [Worker.Abandon]; it must do exactly
// one of the two. When ctx ends, the worker exits as soon as it is idle (so a run that ends leaves no goroutine
// behind for IdleTimeout); a context that cannot end leaves that to the idle check.
func (p *Pool) Start(ctx context.Context, job Job) *Worker {
	p.mu.Lock()
	w := p.idle
	p.idle = nil
	p.mu.Unlock()
	if w == nil {
		w = &Worker{p: p, jobs: make(chan Job, 1), done: make(chan struct{}, 1)}
		w.idle = time.AfterFunc(time.Hour, w.check) // armed below, once w.idle is set for check to use
		w.idle.Reset(idleFor())
		go w.loop()
	}
	if d := ctx.Done(); d != nil && d != w.watched { // once per context, not per job
		if w.stopWatch != nil {
			w.stopWatch()
		}
		w.watched, w.stopWatch = d, context.AfterFunc(ctx, w.retire)
	}
	w.served.Add(1)
	w.jobs <- job // buffered, and this worker serves nobody else: never blocks
	return w
}

// Done is ready, once, when the job given to Start has returned.
func (w *Worker) Done() <-chan struct{} { return w.done }

// Put gives a worker whose job is done back to its pool. If the pool already has an idle worker, or is closed,
// the worker exits.
func (p *Pool) Put(w *Worker) {
	p.mu.Lock()
	keep := p.idle == nil && !p.closed
	if keep {
		p.idle = w
	}
	p.mu.Unlock()
	if !keep {
		close(w.jobs)
	}
}

// Abandon gives up on the worker's job: the caller no longer waits for it. The worker exits once the job
// returns and never serves another.
func (w *Worker) Abandon() { w.lost.Store(true) }

// Close makes the idle worker exit now and every worker given back later exit too. Jobs already running are not
// affected. Close is idempotent.
func (p *Pool) Close() {
	p.mu.Lock()
	w := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	if w != nil {
		close(w.jobs)
	}
}

// take removes w from the idle slot; it reports false if w was not there (a caller has it, or lost it).
func (p *Pool) take(w *Worker) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.idle != w {
		return false
	}
	p.idle = nil
	return true
}

// loop serves jobs until its channel is closed (by Put, Close or the idle check) or its job is abandoned. It
// arms no timer per job: a job costs one channel handoff each way.
func (w *Worker) loop() {
	for job := range w.jobs {
		job.Run()
		if w.lost.Load() {
			w.exit()
			return
		}
		w.done <- struct{}{} // buffered; the previous token was taken before this job was given
	}
	w.exit()
}

func (w *Worker) exit() {
	w.idle.Stop()
	if w.stopWatch != nil {
		w.stopWatch()
	}
}

// retire runs when the context of the worker's last job ends: an idle worker exits now.
func (w *Worker) retire() {
	if w.p.take(w) {
		close(w.jobs)
	}
}

// check runs every IdleTimeout on a timer goroutine: a worker that started no job since the previous check and
// is idle in its pool is taken out and told to exit.
func (w *Worker) check() {
	if w.lost.Load() {
		// Abandoned: it exits after its job, or, if the job had already returned when the caller gave up, it
		// waits for another that never comes. Nobody else closes an abandoned worker (it is never given back).
		close(w.jobs)
		return
	}
	if n := w.served.Load(); n != w.seen {
		w.seen = n
	} else if w.p.take(w) {
		close(w.jobs) // nobody else can close or send to it now: it was idle, and take removed it
		return
	}
	w.idle.Reset(idleFor())
}

// callerAbandonsKey marks a context whose holder runs on a goroutine that its own caller abandons (stops
// waiting for) once the context ends, plus a bounded grace: code receiving such a context may run other host
// code on the calling goroutine instead of handing it to a worker, since a hang there cannot hold anyone past
// the deadline. Only this module's packages can set it. Its value is the caller's notification (see Abandoned).
type callerAbandonsKey struct{}

// WithCallerAbandons returns ctx marked as described at callerAbandonsKey. abandoned, if not nil, is what
// [Abandoned] calls.
func WithCallerAbandons(ctx context.Context, abandoned func()) context.Context {
	if abandoned == nil {
		abandoned = func() {}
	}
	return context.WithValue(ctx, callerAbandonsKey{}, abandoned)
}

// CallerAbandons reports whether ctx was marked by WithCallerAbandons.
func CallerAbandons(ctx context.Context) bool {
	_, ok := ctx.Value(callerAbandonsKey{}).(func())
	return ok
}

// Abandoned tells the caller that marked ctx that the code it called gave up on something running on the
// caller's goroutine (the gate abandoned a tool and recorded it): the caller need not wait any longer.
func Abandoned(ctx context.Context) {
	if f, ok := ctx.Value(callerAbandonsKey{}).(func()); ok {
		f()
	}
}
