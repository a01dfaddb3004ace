package engine

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// requireHugeCode skips where the system has no transparent huge pages and fails where it has them but the
// wrapper was not installed: an x/sys/unix whose mapper changed must be noticed, not silently slow.
func requireHugeCode(t *testing.T) {
	t.Helper()
	if hugeCodeInstalled != "" {
		t.Fatalf("the huge-page wrapper is not installed: %s", hugeCodeInstalled)
	}
	if why := hugeCodeOff(); why != "" {
		t.Skipf("no huge pages for code here: %s", why)
	}
}

// mapping is one line of /proc/self/smaps with its VmFlags.
type mapping struct {
	start, end uintptr
	perms      string
	path       string
	flags      []string
}

func (m mapping) has(flag string) bool {
	for _, f := range m.flags {
		if f == flag {
			return true
		}
	}
	return false
}

func smaps(t *testing.T) []mapping {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []mapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "VmFlags:"); ok && len(out) > 0 {
			out[len(out)-1].flags = strings.Fields(rest)
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 5 || !strings.Contains(fields[0], "-") || strings.HasSuffix(fields[0], ":") {
			continue
		}
		var m mapping
		if _, err := fmt.Sscanf(fields[0], "%x-%x", &m.start, &m.end); err != nil {
			continue
		}
		m.perms = fields[1]
		if len(fields) > 5 {
			m.path = fields[5]
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func mappingAt(t *testing.T, addr uintptr) (mapping, bool) {
	for _, m := range smaps(t) {
		if m.start <= addr && addr < m.end {
			return m, true
		}
	}
	return mapping{}, false
}

// While a Compile runs, an anonymous read-write mapping of at least 2 MiB made with unix.Mmap (the form of
// wazero's code region) is 2 MiB-aligned, of the requested length and advised MADV_HUGEPAGE; unmapping it
// releases exactly it. Outside a Compile, and for other forms, mappings are untouched.
func TestHugeCodeMmap(t *testing.T) {
	requireHugeCode(t)
	const size = 5<<20 + 12345
	rw, anon := unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE

	before := hugeCodeAdvised.Load()
	b, err := unix.Mmap(-1, 0, size, rw, anon)
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := mappingAt(t, uintptr(unsafe.Pointer(&b[0]))); !ok || m.has("hg") || hugeCodeAdvised.Load() != before {
		t.Fatalf("a mapping outside a Compile was advised: %+v", m)
	}
	if err := unix.Munmap(b); err != nil {
		t.Fatal(err)
	}

	withHugeCode(func() {
		b, err = unix.Mmap(-1, 0, size, rw, anon)
		if err != nil {
			t.Fatal(err)
		}
		small, err := unix.Mmap(-1, 0, 1<<20, rw, anon)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(small)
		none, err := unix.Mmap(-1, 0, 4<<20, unix.PROT_NONE, anon|unix.MAP_NORESERVE)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(none)
		for name, o := range map[string][]byte{"1 MiB": small, "PROT_NONE": none} {
			if m, ok := mappingAt(t, uintptr(unsafe.Pointer(&o[0]))); !ok || m.has("hg") {
				t.Errorf("the %s mapping was advised: %+v", name, m)
			}
		}
	})
	if got := hugeCodeAdvised.Load() - before; got != 1 {
		t.Fatalf("%d mappings advised, want 1", got)
	}
	addr := uintptr(unsafe.Pointer(&b[0]))
	if len(b) != size || cap(b) != size || addr%hugePageSize != 0 {
		t.Fatalf("mapping at %#x, len %d cap %d: want %d bytes at a multiple of 2 MiB", addr, len(b), cap(b), size)
	}
	m, ok := mappingAt(t, addr)
	if !ok || !m.has("hg") || m.start != addr || m.end != addr+(size+4095)&^4095 {
		t.Fatalf("the mapping at %#x is %+v: want exactly it, advised (hg)", addr, m)
	}
	for i := 0; i < size; i += 4096 {
		b[i] = byte(i)
	}
	if err := unix.Munmap(b); err != nil {
		t.Fatal(err)
	}
	for _, m := range smaps(t) {
		if m.start < addr+size && addr < m.end && m.path == "" && m.has("hg") {
			t.Fatalf("after Munmap, %+v is still mapped", m)
		}
	}
}

// A module loaded from the cache has its code in one advised mapping, which wazero releases once the module is
// closed and collected.
func TestHugeCodeCompiledModule(t *testing.T) {
	requireHugeCode(t)
	wasm := bigCodeModule(16, 4000)
	dir := t.TempDir()
	ctx := context.Background()
	codeRegions := func() (n int) {
		for _, m := range smaps(t) {
			if m.perms == "r-xp" && m.path == "" && m.has("hg") && m.end-m.start >= hugePageSize {
				n++
			}
		}
		return n
	}
	for _, hit := range []bool{false, true} {
		before, advised := codeRegions(), hugeCodeAdvised.Load()
		eng, err := NewWazero(ctx, WazeroConfig{CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		m, err := eng.Compile(ctx, wasm)
		if err != nil {
			t.Fatal(err)
		}
		if got := codeRegions(); got != before+1 || hugeCodeAdvised.Load() == advised {
			t.Fatalf("cache hit %v: %d advised code regions after Compile, %d before", hit, got, before)
		}
		inst, err := m.Instantiate(ctx, InstanceConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if res, err := inst.Call(ctx, "fbaa", 7); err != nil || res[0] != 7 {
			t.Fatalf("fbaa(7) = %v, %v", res, err)
		}
		_ = inst.Close(ctx)
		_ = m.Close(ctx)
		_ = eng.Close(ctx)
		deadline := time.Now().Add(5 * time.Second)
		for codeRegions() > before {
			if time.Now().After(deadline) {
				t.Fatalf("cache hit %v: the code region is still mapped 5 s after Close", hit)
			}
			runtime.GC()
			time.Sleep(10 * time.Millisecond)
		}
	}
}
