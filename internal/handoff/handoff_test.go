package handoff

import (
	"bytes"
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/internal/goroutineid"
)

// goid returns the current goroutine's id.
var goid = goroutineid.ID

func run(t *testing.T, p *Pool, job Func) {
	t.Helper()
	w := p.Start(context.Background(), job)
	select {
	case <-w.Done():
		p.Put(w)
	case <-time.After(10 * time.Second):
		t.Fatal("job did not finish")
	}
}

// Sequential jobs run on one goroutine, not on a new one each.
func TestWorkerIsReused(t *testing.T) {
	var p Pool
	defer p.Close()
	ids := map[uint64]bool{}
	for range 100 {
		run(t, &p, func() { ids[goid()] = true })
	}
	if len(ids) != 1 {
		t.Fatalf("100 sequential jobs ran on %d goroutines, want 1", len(ids))
	}
}

// A worker whose job was abandoned is never given another job: the next job runs at once on a new goroutine,
// and the abandoned one exits when its job returns.
func TestAbandonedWorkerIsNotReused(t *testing.T) {
	var p Pool
	defer p.Close()
	var first uint64
	run(t, &p, func() { first = goid() })
	release := make(chan struct{})
	exited := make(chan struct{})
	w := p.Start(context.Background(), Func(func() { <-release }))
	w.Abandon()
	var second uint64
	run(t, &p, func() { second = goid() }) // would hang if it waited for the stuck worker
	if second == first {
		t.Fatal("the next job ran on the abandoned worker")
	}
	go func() {
		// The abandoned worker's goroutine must be gone after its job: nothing may send it work again.
		for i := 0; i < 1000 && stackHas("handoff.(*Worker).loop") > 1; i++ {
			time.Sleep(10 * time.Millisecond)
		}
		close(exited)
	}()
	close(release)
	<-exited
	if n := stackHas("handoff.(*Worker).loop"); n != 1 {
		t.Fatalf("%d workers alive after the abandoned job returned, want 1 (the idle one)", n)
	}
}

// stackHas counts the goroutines whose stack mentions fn.
func stackHas(fn string) int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte(fn)) {
			n++
		}
	}
	return n
}

// An idle worker leaves after the idle timeout, and Close ends the idle worker at once.
func TestIdleWorkersExit(t *testing.T) {
	old := idleTimeout.Load()
	idleTimeout.Store(int64(20 * time.Millisecond))
	defer idleTimeout.Store(old)
	waitGone := func(what string) {
		t.Helper()
		for i := 0; stackHas("handoff.(*Worker).loop") > 0; i++ {
			if i > 500 {
				t.Fatalf("%s: a worker is still alive", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	var p Pool
	run(t, &p, func() {})
	waitGone("after the idle timeout")
	run(t, &p, func() {}) // a new worker after the old one left
	p.Close()
	waitGone("after the first pool's Close")
	idleTimeout.Store(int64(time.Hour))
	var q Pool
	run(t, &q, func() {})
	q.Close()
	waitGone("after Close")
	run(t, &q, func() {}) // a closed pool still runs jobs, but keeps no worker
	waitGone("after a job of a closed pool")
}

// Concurrent callers each get a worker; nothing is lost or run twice (run with -race).
func TestConcurrentJobs(t *testing.T) {
	var p Pool
	defer p.Close()
	var n atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range 500 {
				w := p.Start(context.Background(), Func(func() { n.Add(1) }))
				if i%50 == 49 { // some callers give up
					w.Abandon()
					continue
				}
				<-w.Done()
				p.Put(w)
			}
		})
	}
	wg.Wait()
	for i := 0; n.Load() != 8*500 && i < 1000; i++ {
		time.Sleep(time.Millisecond) // the abandoned jobs still run
	}
	if got := n.Load(); got != 8*500 {
		t.Fatalf("%d jobs ran, want %d", got, 8*500)
	}
}

type deepJob struct{ n int }

// Run uses a few KiB of stack, as a tool call through the gate does, so that a new goroutine must grow its stack.
func (j *deepJob) Run() {
	var buf [4096]byte
	buf[j.n%len(buf)] = 1
	j.n += int(buf[0])
}

// BenchmarkHandoff is one job on the pool's reused worker; BenchmarkGoroutinePerJob is what it replaced (a new
// goroutine and channel per job).
func BenchmarkHandoff(b *testing.B) {
	var p Pool
	defer p.Close()
	j := &deepJob{}
	for b.Loop() {
		w := p.Start(context.Background(), j)
		<-w.Done()
		p.Put(w)
	}
}

func BenchmarkGoroutinePerJob(b *testing.B) {
	j := &deepJob{}
	for b.Loop() {
		ch := make(chan struct{}, 1)
		go func() { j.Run(); ch <- struct{}{} }()
		<-ch
	}
}

// A worker whose last job's context ended exits at once, without waiting for the idle check.
func TestWorkerRetiresWithItsContext(t *testing.T) {
	idleTimeout.Store(int64(time.Hour))
	defer idleTimeout.Store(0)
	var p Pool
	ctx, cancel := context.WithCancel(context.Background())
	for range 3 {
		w := p.Start(ctx, Func(func() {}))
		<-w.Done()
		p.Put(w)
	}
	if n := stackHas("handoff.(*Worker).loop"); n != 1 {
		t.Fatalf("%d workers, want 1", n)
	}
	cancel()
	for i := 0; stackHas("handoff.(*Worker).loop") > 0; i++ {
		if i > 500 {
			t.Fatal("the worker outlived its context")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A caller that gives up after the job returned (its Done token unread) still lets the worker go: the idle
// check ends it.
func TestAbandonAfterTheJobReturned(t *testing.T) {
	idleTimeout.Store(int64(20 * time.Millisecond))
	defer idleTimeout.Store(0)
	var p Pool
	defer p.Close()
	w := p.Start(context.Background(), Func(func() {}))
	for len(w.done) == 0 {
		time.Sleep(time.Millisecond)
	}
	w.Abandon()
	for i := 0; stackHas("handoff.(*Worker).loop") > 0; i++ {
		if i > 500 {
			t.Fatal("the abandoned worker never exited")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
