//go:build !unix

package wasmbox

import (
	"flag"
	"time"
)

var cpuPhases = flag.Bool("cpu-phases", false, "BenchmarkFreshRunPhases: no thread CPU clock on this system (wall time is used)")

func threadCPUTime() time.Time { return time.Now() }
