package mcp

import (
	"bytes"
	"os"
	"strconv"
	"sync"
	"syscall"
)

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER of prctl(2).
const prSetChildSubreaper = 36

var (
	subreaperOnce sync.Once
	subreaperOK   bool // this process is a child subreaper
)

// becomeSubreaper makes this process the subreaper of its descendants (once), reporting whether it is: an
// orphaned descendant (a server's child that called setsid and whose parent ended) is reparented here, not to
// init, so it stays within reach.
func becomeSubreaper() bool {
	subreaperOnce.Do(func() {
		_, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
		subreaperOK = e == 0
	})
	return subreaperOK
}

// stat reads the parent pid of pid from /proc.
func parentOf(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// pid (comm) state ppid ...: comm may contain spaces and parentheses; the last ')' ends it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(string(f[1]))
	return pp, err == nil
}

// descendants lists the living descendants of pid, whatever process group or session they moved to, by the
// parent links in /proc.
func descendants(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, ok := parentOf(p); ok {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 && len(out) < 1<<16 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}
