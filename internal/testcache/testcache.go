// Package testcache gives a test binary a temporary wasmbox cache instead of the user's: call Main from TestMain.
// Sandboxes created with the default Config.CacheDir then compile into one temporary directory per test binary
// (or into $WASMBOX_TEST_CACHE, which CI shares between the test binaries of one run), removed at the end; child
// processes (the CLI) get it through $WASMBOX_CACHE_DIR.
package testcache

import (
	"fmt"
	"os"
	"sync/atomic"
)

var dir, tmp atomic.Pointer[string]

// Dir is the directory set by Main, or "" outside tests.
func Dir() string {
	if d := dir.Load(); d != nil {
		return *d
	}
	return ""
}

// TempDir is a directory for what the tests of one process share and that outlives a single test (a precompiled
// directory made once): unlike the cache, it is always removed when the tests end. "" outside Main.
func TempDir() string {
	if d := tmp.Load(); d != nil {
		return *d
	}
	return ""
}

// Main runs the tests (a *testing.M) with a temporary cache and exits. (It takes an interface so that the library,
// which reads Dir, does not import package testing.)
func Main(m interface{ Run() int }) {
	d, own := os.Getenv("WASMBOX_TEST_CACHE"), false
	if d == "" {
		var err error
		if d, err = os.MkdirTemp("", "wasmbox-test-cache-"); err != nil {
			fmt.Fprintln(os.Stderr, "testcache:", err)
			os.Exit(1)
		}
		own = true
	}
	dir.Store(&d)
	os.Setenv("WASMBOX_CACHE_DIR", d)  // the CLI's
	os.Setenv("WASMBOX_TEST_CACHE", d) // test binaries started by this one share it
	t, err := os.MkdirTemp("", "wasmbox-test-tmp-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testcache:", err)
		os.Exit(1)
	}
	tmp.Store(&t)
	code := m.Run()
	os.RemoveAll(t)
	if own {
		os.RemoveAll(d)
	}
	os.Exit(code)
}
