package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/store"
)

// A SQLite store outlives the process that wrote it: a budget shared by every process that opens the file.
func ExampleOpen() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	db, err := store.Open(ctx, "sqlite:"+filepath.Join(dir, "tasks.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	budget, err := governance.NewStoreBudget(db, "tenant-42", governance.SharedLimits{MaxCalls: 2})
	if err != nil {
		panic(err)
	}
	for i := range 3 {
		_, err := budget.Reserve(ctx, governance.Call{Tool: "search", Effect: governance.ReadOnly})
		fmt.Println(i+1, err)
	}
	u, _ := budget.Usage(ctx)
	fmt.Println(db.Kind(), "calls spent:", u.Calls)
	// Output:
	// 1 <nil>
	// 2 <nil>
	// 3 shared budget "tenant-42": max calls (2) reached
	// sqlite calls spent: 2
}
