// Package starttrace times the phases of a process's first sandbox, for the cold-start benchmark
// (bench/compare's P2 parts), the CLI's WASMBOX_STARTTRACE and tests. It is off unless a benchmark, test or the
// CLI calls Enable; then Mark records the time since the previous mark under a phase name. The library never
// prints or logs these.
package starttrace

import (
	"strconv"
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

// EnableSince starts recording with a first phase, name, that began at t0 (a time taken by the parent before it
// started this process, say): its CPU time is everything this process used so far.
func EnableSince(t0 time.Time, name string) {
	mu.Lock()
	on, last, lastCPU, phases = true, t0, 0, nil
	mu.Unlock()
	Mark(name)
}

// EnvVar is the environment variable through which a parent process hands a child the moment it started it
// (Unix nanoseconds), so that the child's first phase covers its own start (exec, the Go runtime, package
// initialisation).
const EnvVar = "WASMBOX_STARTTRACE"

// FromEnv enables recording when EnvVar is set: with a first phase "process start, Go runtime and package init"
// from the time it names, or from now if it is not a time in the last minute. It reports whether recording is on.
func FromEnv(getenv func(string) string) bool {
	v := getenv(EnvVar)
	if v == "" {
		return false
	}
	// A time in the last minute (a parent's start of this process); anything else ("1") means from now.
	if ns, err := strconv.ParseInt(v, 10, 64); err == nil && time.Since(time.Unix(0, ns)) >= 0 && time.Since(time.Unix(0, ns)) < time.Minute {
		EnableSince(time.Unix(0, ns), ProcessStart)
	} else {
		Enable()
	}
	return true
}

// ProcessStart names the phase from the parent's start of the process to its main function.
const ProcessStart = "process start, Go runtime and package init"

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

// On reports whether recording is on.
func On() bool {
	mu.Lock()
	defer mu.Unlock()
	return on
}

// Take returns the phases recorded so far and stops recording.
func Take() []Phase {
	mu.Lock()
	defer mu.Unlock()
	p := phases
	on, phases = false, nil
	return p
}
