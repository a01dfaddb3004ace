//go:build !unix

package bench

import "time"

// cpuTime has no portable source outside unix: it reports zero, so the tracing benchmarks' CPU columns read
// zero there and only their wall-clock columns mean anything.
func cpuTime() time.Duration { return 0 }
