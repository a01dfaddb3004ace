//go:build !linux

package main

import (
	"errors"
	"time"
)

type pinning struct{ cpus []int }

func newPinning() (*pinning, error) {
	return nil, errors.New("compare: pinning to one CPU is implemented on Linux only")
}
func (p *pinning) also(int)       {}
func (p *pinning) pin(int) error  { return nil }
func (p *pinning) release() error { return nil }

// cpuTime is not read outside Linux here: CPU-time ratios are then absent and the wall-time ones stand.
func cpuTime() time.Duration { return 0 }
