package governance_test

import (
	"testing"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/governance/storetest"
)

func TestMemoryStoreContract(t *testing.T) {
	storetest.Run(t, func(*testing.T) governance.Store { return new(governance.MemoryStore) })
}

func TestMemoryStoreGovernance(t *testing.T) {
	storetest.RunGovernance(t, func(*testing.T) governance.Store { return new(governance.MemoryStore) })
}
