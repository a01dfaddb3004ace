package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pinning moves every thread of this process, and of the given other processes, onto one CPU at a time, so
// that both members of an interleaved pair run on the same CPU. On a virtual machine the CPUs are not alike from
// moment to moment: on the 2-vCPU machine W1 was measured on, native W1 took 0.25 s on one vCPU and 0.45 s on the
// other in the same minute, pinned with taskset, with user+system time equal to wall time (the host took the
// time, not another process here). A pair whose members ran on different vCPUs had a ratio of ×1.2 or ×3.7.
type pinning struct {
	cpus []int        // the CPUs this process may run on, in order
	orig unix.CPUSet  // the mask to restore
	pids map[int]bool // processes pinned along with this one (a child inherits its parent's mask)
}

// newPinning returns the CPUs this process may use, or an error if they cannot be read.
func newPinning() (*pinning, error) {
	p := &pinning{pids: map[int]bool{}}
	if err := unix.SchedGetaffinity(0, &p.orig); err != nil {
		return nil, fmt.Errorf("compare: sched_getaffinity: %w", err)
	}
	for c := range 1024 {
		if p.orig.IsSet(c) {
			p.cpus = append(p.cpus, c)
		}
	}
	if len(p.cpus) == 0 {
		return nil, fmt.Errorf("compare: no CPU in this process's affinity mask")
	}
	return p, nil
}

// also adds another process (a peer) to what pin moves.
func (p *pinning) also(pid int) { p.pids[pid] = true }

// pin puts every thread of this process and of the added processes on cpu.
func (p *pinning) pin(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	return p.apply(&set)
}

// release gives every thread its original mask back.
func (p *pinning) release() error { return p.apply(&p.orig) }

func (p *pinning) apply(set *unix.CPUSet) error {
	pids := []int{os.Getpid()}
	for pid := range p.pids {
		pids = append(pids, pid)
	}
	for _, pid := range pids {
		// Threads started while the list is read take the mask of the thread that starts them: a second pass
		// catches one started from a thread not yet moved.
		for range 2 {
			tids, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*"))
			if err != nil {
				return fmt.Errorf("compare: threads of %d: %w", pid, err)
			}
			for _, t := range tids {
				tid, err := strconv.Atoi(filepath.Base(t))
				if err != nil {
					continue
				}
				if err := unix.SchedSetaffinity(tid, set); err != nil && err != syscall.ESRCH {
					return fmt.Errorf("compare: sched_setaffinity %d: %w", tid, err)
				}
			}
		}
	}
	// Let the scheduler move whatever was running elsewhere.
	time.Sleep(time.Millisecond)
	return nil
}

// cpuTime is the user and system time this process has used so far, all threads (getrusage, as the native side
// reads its own with resource.getrusage).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
