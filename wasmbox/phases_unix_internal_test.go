//go:build unix

package wasmbox

import (
	"flag"
	"time"

	"golang.org/x/sys/unix"
)

var cpuPhases = flag.Bool("cpu-phases", false, "BenchmarkFreshRunPhases: measure the thread's CPU time, not wall time")

// threadCPUTime reads the calling thread's CPU clock (user and system time).
func threadCPUTime() time.Time {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Unix(ts.Sec, ts.Nsec)
}
