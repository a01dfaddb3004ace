package goroutineid

import "testing"

func TestIDDiffersAcrossGoroutines(t *testing.T) {
	here := ID()
	there := make(chan uint64)
	go func() { there <- ID() }()
	if other := <-there; here == 0 || other == 0 || here == other || ID() != here {
		t.Fatalf("ids: here %d (again %d), another goroutine %d", here, ID(), other)
	}
}
