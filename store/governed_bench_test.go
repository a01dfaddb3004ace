package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/internal/pgtest"
)

// benchStoreUpdate is one Update of the size a governed call makes twice: a small counter read and written,
// and a record of about 300 bytes written.
func benchStoreUpdate(b *testing.B, s governance.Store) {
	ctx := context.Background()
	rec := make([]byte, 300)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		err := s.Update(ctx, func(tx governance.Tx) error {
			v, _, err := tx.Get("counter")
			if err != nil {
				return err
			}
			if err := tx.Put("counter", append(v[:0:0], '1')); err != nil {
				return err
			}
			return tx.Put(fmt.Sprintf("rec/%012d", i), rec)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// benchGovernedCall is one governed call of a durable task, with its counters, journal and audit chain in the
// store (bench/compare -tasks reports the same as sqlite_task_call_us and postgres_task_call_us).
func benchGovernedCall(b *testing.B, s governance.Store) {
	ctx := context.Background()
	g, err := governance.NewGate(governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: governance.DiscardAuditor{}, Store: s,
		Limits: governance.Limits{MaxToolCalls: 1 << 40}})
	if err != nil {
		b.Fatal(err)
	}
	task, err := g.NewTask(ctx, governance.TaskOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer task.End(ctx, 0, "")
	timeCalls(b, task.Run())
}

// timeCalls makes governed calls in run, b.N of them, each timed on its own, and reports their median too:
// bench/compare reports the p50, which an occasional checkpoint or fsync does not move.
func timeCalls(b *testing.B, run *governance.Run) {
	ctx := context.Background()
	c := governance.Call{Tool: "lookup", Args: json.RawMessage(`{"order_id":"A-1"}`), Source: governance.SourcePython, Effect: governance.ReadOnly}
	tool := func(context.Context, governance.Call) ([]byte, error) { return []byte(`{"ok":true}`), nil }
	b.ReportAllocs()
	var ns []time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := run.Do(ctx, c, tool); err != nil {
			b.Fatal(err)
		}
		ns = append(ns, time.Since(start))
	}
	slices.Sort(ns)
	b.ReportMetric(float64(ns[len(ns)/2].Nanoseconds()), "p50-ns")
}

// benchCallLayout makes the writes of governed calls of durable tasks without the gate: each call is two
// Updates (before the tool and after it), each reading the task record and writing a journal entry, an audit
// record and the task record, of the sizes a traced call of benchGovernedCall writes, 200 calls a task.
// "current" puts them where governance puts them (t/ID, t/ID/j/SEQ and a/t/ID/r/N: three leaves of the B-tree
// dirtied by each Update, and their splits); "adjacent" puts all of a call's keys under one prefix of its task,
// the task record after them, so that an Update dirties one leaf, and those of its splits; "two" keeps the
// journal and the audit records in two ranges under the task's prefix, the record after them (two leaves). The
// differences are what a key layout of that kind would save a governed call on SQLite, before the cost of
// migrating stores.
func benchCallLayout(b *testing.B, layout string) {
	s := sqliteBench(b)
	ctx := context.Background()
	rec, journal, audit := make([]byte, 476), [2][]byte{make([]byte, 231), make([]byte, 228)}, [2][]byte{make([]byte, 508), make([]byte, 571)}
	var ns []time.Duration
	id, seq := "", 0
	for i := 0; b.Loop(); i++ {
		if i%200 == 0 {
			id, seq = fmt.Sprintf("task-%024x", i), 0
		}
		seq++
		start := time.Now()
		for half := range 2 {
			recKey, entryKey, auditKey := "t/"+id, fmt.Sprintf("t/%s/j/%012d", id, seq), fmt.Sprintf("a/t/%s/r/%012d", id, 2*seq-1+half)
			switch layout {
			case "adjacent":
				recKey, entryKey, auditKey = "t/"+id+"/~", fmt.Sprintf("t/%s/c/%012d/j", id, seq), fmt.Sprintf("t/%s/c/%012d/r%d", id, seq, half)
			case "two":
				recKey, entryKey, auditKey = "t/"+id+"/~", fmt.Sprintf("t/%s/j/%012d", id, seq), fmt.Sprintf("t/%s/r/%012d", id, 2*seq-1+half)
			}
			err := s.Update(ctx, func(tx governance.Tx) error {
				if _, _, err := tx.Get(recKey); err != nil {
					return err
				}
				if err := tx.Put(entryKey, journal[half]); err != nil {
					return err
				}
				if err := tx.Put(auditKey, audit[half]); err != nil {
					return err
				}
				return tx.Put(recKey, rec)
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		ns = append(ns, time.Since(start))
	}
	slices.Sort(ns)
	b.ReportMetric(float64(ns[len(ns)/2].Nanoseconds()), "p50-ns")
}

func sqliteBench(b *testing.B) governance.Store {
	db, err := openB(b, "sqlite:"+filepath.Join(b.TempDir(), "b.db"))
	if err != nil {
		b.Fatal(err)
	}
	return db
}

func postgresBench(b *testing.B) governance.Store {
	db, err := openB(b, pgtest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	return db
}

func BenchmarkSQLiteUpdate(b *testing.B)       { benchStoreUpdate(b, sqliteBench(b)) }
func BenchmarkSQLiteGovernedCall(b *testing.B) { benchGovernedCall(b, sqliteBench(b)) }
func BenchmarkSQLiteCallLayout(b *testing.B) {
	for _, layout := range []string{"current", "two", "adjacent"} {
		b.Run(layout, func(b *testing.B) { benchCallLayout(b, layout) })
	}
}
func BenchmarkPostgresUpdate(b *testing.B)       { benchStoreUpdate(b, postgresBench(b)) }
func BenchmarkPostgresGovernedCall(b *testing.B) { benchGovernedCall(b, postgresBench(b)) }

// benchBudgetCall is one governed call of a run (not a durable task) whose budget is a StoreBudget in s: the
// gate's policy, its run limits and audit record, and the budget's one store transaction (bench/compare -tasks
// reports the same as sqlite_governed_call_us and postgres_governed_call_us). With storeAudit the audit
// records go to a StoreAuditor's chain in s as well (*_governed_call_shared_audit_us).
func benchBudgetCall(b *testing.B, s governance.Store, storeAudit bool) {
	var aud governance.Auditor = &governance.MemoryAuditor{Limit: 1000}
	if storeAudit {
		a, err := governance.NewStoreAuditor(s, "bench", nil)
		if err != nil {
			b.Fatal(err)
		}
		aud = a
	}
	budget, err := governance.NewStoreBudget(s, "bench", governance.SharedLimits{MaxCalls: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	g, err := governance.NewGate(governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: aud,
		NewBudget: func(string) governance.Budget { return budget }, Limits: governance.Limits{MaxToolCalls: 1 << 40}})
	if err != nil {
		b.Fatal(err)
	}
	timeCalls(b, g.NewRun("bench"))
}

func BenchmarkSQLiteBudgetCall(b *testing.B) {
	b.Run("budget", func(b *testing.B) { benchBudgetCall(b, sqliteBench(b), false) })
	b.Run("budget+audit", func(b *testing.B) { benchBudgetCall(b, sqliteBench(b), true) })
}
func BenchmarkPostgresBudgetCall(b *testing.B) {
	b.Run("budget", func(b *testing.B) { benchBudgetCall(b, postgresBench(b), false) })
	b.Run("budget+audit", func(b *testing.B) { benchBudgetCall(b, postgresBench(b), true) })
}
