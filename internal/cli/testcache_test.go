package cli

import (
	"testing"

	"github.com/wasmbox/wasmbox/internal/testcache"
)

// TestMain gives the tests a temporary cache: they never read or write the user's.
func TestMain(m *testing.M) { testcache.Main(m) }
