// Package starttrace times the phases of a process's first sandbox, for the cold-start benchmark
// (bench/compare's P2 parts) and tests. It is off unless a benchmark or test calls Enable; then Mark records the
// time since the previous mark under a phase name. The library never prints or logs these.
package starttrace

import (
	"sync"
	"time"
)

// Phase is one measured step.
type Phase struct {
	Name string        `json:"name"`
	Took time.Duration `json:"took_ns"`
	// CPU is the process's CPU time (user + system, all threads) spent in the phase, where the system reports it:
	// on a loaded machine it measures the work better than Took.
	CPU time.Duration `json:"cpu_ns"`
}

var (
	mu      sync.Mutex
	on      bool
	last    time.Time
	lastCPU time.Duration
	phases  []Phase
)

// Enable starts recording; the first phase is measured from now.
func Enable() {
	mu.Lock()
	on, last, lastCPU, phases = true, time.Now(), cpuTime(), nil
	mu.Unlock()
}

// Mark ends the phase called name (the time since the previous mark, or since Enable). It does nothing unless
// recording.
func Mark(name string) {
	mu.Lock()
	if on {
		now, cpu := time.Now(), cpuTime()
		phases = append(phases, Phase{Name: name, Took: now.Sub(last), CPU: cpu - lastCPU})
		last, lastCPU = now, cpu
	}
	mu.Unlock()
}

// Take returns the phases recorded so far and stops recording.
func Take() []Phase {
	mu.Lock()
	defer mu.Unlock()
	p := phases
	on, phases = false, nil
	return p
}
