package governance

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultLeaseTTL is how long a process holds a task it runs without renewing it, when GateConfig.LeaseTTL is
// zero. A process that dies loses the task this long after its last renewal; another may then resume it.
const DefaultLeaseTTL = 30 * time.Second

// MaxTaskMeta bounds the caller's data kept with a task (TaskOptions.Meta).
const MaxTaskMeta = 32 << 20

// The errors of durable tasks. Each satisfies errors.Is with one of these.
var (
	// ErrPaused: the task's run stopped at a call that waits for a decision; see [PausedError].
	ErrPaused = errors.New("governance: task paused for a decision")
	// ErrNoStore: a durable task was asked of a gate without GateConfig.Store.
	ErrNoStore = errors.New("governance: no store configured (GateConfig.Store)")
	// ErrTaskUnknown: no task with that ID in the store (a forged or mistyped ID, or one from another store).
	ErrTaskUnknown = errors.New("governance: unknown task")
	// ErrTaskBusy: another process holds the task's lease (it is running the task now).
	ErrTaskBusy = errors.New("governance: task is being run by another process")
	// ErrTaskEnded: the task is done or failed; it cannot be resumed.
	ErrTaskEnded = errors.New("governance: task has ended")
	// ErrTaskMismatch: the task was started with another interpreter, tool set or program than the one that
	// tries to resume it.
	ErrTaskMismatch = errors.New("governance: task was started with a different configuration")
	// ErrDiverged: a resumed program made a call that differs from the one its journal recorded at that
	// position (another tool or other arguments), so replaying it cannot be trusted.
	ErrDiverged = errors.New("governance: resumed program diverged from its journal")
	// ErrTaskLost: the process lost its lease on the task (it took too long to renew it, and another process
	// took the task over); it must stop running it.
	ErrTaskLost = errors.New("governance: lease on the task lost")
	// ErrNotPending: a decision for a call that is not waiting for one.
	ErrNotPending = errors.New("governance: no such pending call")
	// ErrAlreadyDecided: a second decision for a call; the first one stands.
	ErrAlreadyDecided = errors.New("governance: call already decided")
	// ErrOutcomeUnknown: an effectful call was started but its result was never recorded (its process died), and
	// the decision was not to run it again.
	ErrOutcomeUnknown = errors.New("governance: outcome of the call is unknown")
)

// The statuses of records that only durable tasks write.
const (
	// StatusPaused: the call waits for a decision; the task paused.
	StatusPaused Status = "paused"
	// StatusDecided: a person (or program) decided a paused call: Decision is "allow" or "deny".
	StatusDecided Status = "decided"
	// StatusMeta: the caller's data kept with the task (TaskOptions.Meta, Task.SetMeta: what a resume runs) was
	// set. ResultSize and ResultSHA256 describe it, so that VerifyTask and ResumeTask detect an edit of it in
	// the store.
	StatusMeta Status = "meta"
	// StatusMemo: the result of a Memo step was kept. Args is {"memo":N} (the step's number), and ResultSize
	// and ResultSHA256 describe the result.
	StatusMemo Status = "memo"
)

// TaskState is where a durable task is.
type TaskState string

// The states of a task.
const (
	TaskRunning TaskState = "running"
	TaskPaused  TaskState = "paused"
	TaskDone    TaskState = "done"
	TaskFailed  TaskState = "failed"
)

// PendingCall is a call that waits for a decision.
type PendingCall struct {
	TaskID string `json:"task_id"`
	Seq    int64  `json:"seq"`
	Tool   string `json:"tool"`
	// Args are the call's complete arguments as the approver must see them (after GateConfig.Redact): never
	// shorten them when showing them.
	Args   json.RawMessage `json:"args"`
	Effect Effect          `json:"effect"`
	Cost   int64           `json:"cost"`
	// Reason says why a decision is needed.
	Reason string `json:"reason"`
	// OutcomeUnknown: the call was started by a process that died before its result was recorded. Allowing
	// it runs it again (with the same idempotency key); denying it fails the call with ErrOutcomeUnknown.
	OutcomeUnknown bool      `json:"outcome_unknown,omitempty"`
	Since          time.Time `json:"since"`
}

// PausedError is returned by [Run.Do] (and so ends the program's run) when a durable task's call needs a
// decision, and by [Gate.ResumeTask] for a task still waiting for one.
type PausedError struct {
	Pending PendingCall
}

func (e *PausedError) Error() string {
	what := "approval"
	if e.Pending.OutcomeUnknown {
		what = "a decision (its outcome is unknown)"
	}
	return fmt.Sprintf("governance: task %s paused: call %d (tool %s) waits for %s", e.Pending.TaskID, e.Pending.Seq, quoteName(e.Pending.Tool), what)
}

// Unwrap returns ErrPaused.
func (e *PausedError) Unwrap() error { return ErrPaused }

// TaskDecision is a decision on a pending call.
type TaskDecision struct {
	Allow bool `json:"allow"`
	// DecidedBy names who decided ("approver:cli:alice"); empty means "approver".
	DecidedBy string    `json:"decided_by"`
	Reason    string    `json:"reason"`
	Time      time.Time `json:"time"`
}

// TaskOptions describe a task to [Gate.NewTask] or [Gate.ResumeTask].
type TaskOptions struct {
	// ID names a new task; empty means a random one. It is 1 to 128 characters of [A-Za-z0-9._-], starting
	// with a letter or digit. ResumeTask ignores it.
	ID string
	// Fingerprint identifies what the task runs (interpreter, tools, program, sandbox settings). ResumeTask
	// refuses a task started with another fingerprint (ErrTaskMismatch). At most 1 KiB.
	Fingerprint string
	// Meta is the caller's data kept with a new task (what it needs to resume it: the program, the initial
	// workspace), at most MaxTaskMeta bytes. ResumeTask ignores it; Task.Meta returns it.
	Meta []byte
	// Holder names the process in the task's lease, for messages ("" means hostname:pid).
	Holder string
}

// TaskInfo describes a task in a store.
type TaskInfo struct {
	ID          string           `json:"id"`
	State       TaskState        `json:"state"`
	Fingerprint string           `json:"fingerprint"`
	Created     time.Time        `json:"created"`
	Updated     time.Time        `json:"updated"`
	Holder      string           `json:"holder,omitempty"`
	LeaseUntil  time.Time        `json:"lease_until,omitzero"`
	Calls       int64            `json:"calls"`
	Denied      int64            `json:"denied"`
	CostUnits   int64            `json:"cost_units"`
	Irrev       int64            `json:"irreversible"`
	PerTool     map[string]int64 `json:"per_tool,omitempty"`
	// Journal is the number of calls the task's journal holds.
	Journal int64 `json:"journal"`
	// Used is the program time the task has used over all its runs (Task.End adds each run's).
	Used time.Duration `json:"used_ns"`
	// Runs counts how many times the task was started or resumed.
	Runs    int          `json:"runs"`
	Error   string       `json:"error,omitempty"`
	Pending *PendingCall `json:"pending,omitempty"`
	// AuditHead and AuditRecords are the head hash and the length of the task's audit chain.
	AuditHead    string `json:"audit_head,omitempty"`
	AuditRecords int64  `json:"audit_records"`
	// token is the lease holder's secret: only the process that holds it may write the task.
	Token string `json:"token,omitempty"`
}

// journalEntry is one call of a task's journal, at its position (Seq).
type journalEntry struct {
	Seq        int64         `json:"seq"`
	Tool       string        `json:"tool"`
	ArgsSHA256 string        `json:"args_sha256"`
	Effect     Effect        `json:"effect"`
	Cost       int64         `json:"cost"`
	Status     string        `json:"status"` // started, ok, failed, denied, pending
	Result     []byte        `json:"result,omitempty"`
	Error      string        `json:"error,omitempty"`
	Kind       string        `json:"kind,omitempty"`
	Reason     string        `json:"reason,omitempty"`
	DecidedBy  string        `json:"decided_by,omitempty"`
	Pending    *PendingCall  `json:"pending,omitempty"`
	Decision   *TaskDecision `json:"decision,omitempty"`
	// Args are the arguments as the approver sees them, kept while the call runs ("started"), for the decision
	// its outcome needs if its process dies.
	Args json.RawMessage `json:"args,omitempty"`
}

const (
	entryStarted = "started"
	entryOK      = "ok"
	entryFailed  = "failed"
	entryDenied  = "denied"
	entryPending = "pending"
)

var taskIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func checkTaskID(id string) error {
	if !taskIDPattern.MatchString(id) {
		return fmt.Errorf("%w: %q is not a task ID (1 to 128 of [A-Za-z0-9._-])", ErrTaskUnknown, truncateUTF8(id, 140))
	}
	return nil
}

func taskKey(id string) string                 { return "t/" + id }
func taskMetaKey(id string) string             { return "t/" + id + "/m" }
func taskEntryKey(id string, seq int64) string { return fmt.Sprintf("t/%s/j/%012d", id, seq) }
func pendingKey(id string, seq int64) string   { return fmt.Sprintf("q/%s/%012d", id, seq) }
func taskChain(id string) string               { return "t/" + id }
func taskMemoKey(id string, n int64) string    { return fmt.Sprintf("t/%s/s/%012d", id, n) }

// Task is a durable task opened by this process: a governance [Run] whose calls are journaled in the gate's
// store, with its budgets, call counts, pending decision and audit chain kept there. The process holds the
// task's lease while the task is open (renewed in the background); End releases it.
//
// A task's program runs in deterministic mode and calls its tools through Task.Run. When the task was
// resumed, the first Replay() calls are answered from the journal (checked against it: another tool or other
// arguments end the run with ErrDiverged) without running the tools again; the call that paused the task gets
// its decision; later calls are new. A call that needs approval pauses the task: Do returns a *PausedError and
// [Run.Halted] reports it, and the caller must end the program and call End.
type Task struct {
	g      *Gate
	id     string
	token  string
	holder string
	run    *Run
	meta   []byte

	mu      sync.Mutex // one call or lease operation at a time
	info    TaskInfo
	journal []journalEntry // what the store held when the task was opened
	ended   bool
	memoN   int // the steps recorded with Memo by this process's run
	// memoSums holds the SHA-256 (hex) the audit chain recorded for each Memo result in the store when the
	// task was opened: a result read later must still be that one.
	memoSums map[int64]string
	// replayEnded is when the run first made a call the journal does not answer with a recorded outcome.
	replayEnded time.Time
	// rec is the task's record as this process last wrote it, and recInfo what it decodes to: update reads the
	// record in every transaction (another replica may have changed it) but decodes it only when its bytes
	// differ from rec.
	rec     []byte
	recInfo TaskInfo
	stop    chan struct{}
	stopped chan struct{}
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func defaultHolder(h string) string {
	if h != "" {
		return truncateUTF8(h, 200)
	}
	host, _ := os.Hostname()
	return host + ":" + strconv.Itoa(os.Getpid())
}

func (g *Gate) leaseTTL() time.Duration {
	if g.leaseTTLv > 0 {
		return g.leaseTTLv
	}
	return DefaultLeaseTTL
}

// Store returns the gate's store (GateConfig.Store), or nil.
func (g *Gate) Store() Store { return g.store }

// NewTask starts a durable task in the gate's store and opens it for this process.
//
// # Errors
//
// ErrNoStore without a store; an error wrapping ErrStore if the store fails; an invalid or taken ID.
func (g *Gate) NewTask(ctx context.Context, opts TaskOptions) (*Task, error) {
	if g.store == nil {
		return nil, ErrNoStore
	}
	id := opts.ID
	if id == "" {
		var b [12]byte
		_, _ = rand.Read(b[:])
		id = "task-" + hex.EncodeToString(b[:])
	}
	if err := checkTaskID(id); err != nil {
		return nil, fmt.Errorf("governance: NewTask: %w", err)
	}
	if len(opts.Fingerprint) > 1024 {
		return nil, errors.New("governance: NewTask: Fingerprint longer than 1 KiB")
	}
	if len(opts.Meta) > MaxTaskMeta {
		return nil, fmt.Errorf("governance: NewTask: Meta of %d bytes (max %d)", len(opts.Meta), MaxTaskMeta)
	}
	now := g.clock()
	t := &Task{g: g, id: id, token: newToken(), holder: defaultHolder(opts.Holder), meta: bytes.Clone(opts.Meta)}
	t.info = TaskInfo{ID: id, State: TaskRunning, Fingerprint: opts.Fingerprint, Created: now, Updated: now,
		Holder: t.holder, LeaseUntil: now.Add(g.leaseTTL()), Runs: 1, Token: t.token}
	base := t.info
	var rec []byte
	err := g.store.Update(ctx, func(tx Tx) error {
		if _, ok, err := tx.Get(taskKey(id)); err != nil {
			return err
		} else if ok {
			return fmt.Errorf("governance: NewTask: task %s already exists", id)
		}
		if err := tx.Put(taskMetaKey(id), t.meta); err != nil {
			return err
		}
		// The store may run this function more than once: each run starts from the same state.
		t.info = base
		if _, err := appendTaskChain(tx, &t.info, g.storeKey, dataRecord(id, 0, StatusMeta, nil, t.meta, now)); err != nil {
			return err
		}
		var err error
		rec, err = putTask(tx, &t.info)
		return err
	})
	if err != nil {
		return nil, err
	}
	t.cacheRecord(rec, &t.info)
	t.start()
	return t, nil
}

// dataRecord is the audit record of data kept with task id that is not a call (StatusMeta, StatusMemo): seq is
// the number of calls the task's journal held then, args what the record says of the data, and the data itself
// is described by its size and SHA-256.
func dataRecord(id string, seq int64, outcome Status, args json.RawMessage, data []byte, now time.Time) Record {
	sum := sha256.Sum256(data)
	return Record{Version: RecordVersion, Time: now.UTC(), RunID: id, Seq: seq, Args: args, Decision: "allow", DecidedBy: "task",
		Outcome: outcome, ResultSize: int64(len(data)), ResultSHA256: hex.EncodeToString(sum[:])}
}

// ResumeTask opens a paused task (or one whose previous process died: its lease expired) for this process.
// The returned Task's Run answers the calls of the journal before making new ones.
//
// # Errors
//
// A *PausedError when the task still waits for a decision (nothing to resume yet); ErrTaskUnknown,
// ErrTaskBusy (another process holds the lease), ErrTaskEnded, ErrTaskMismatch (opts.Fingerprint differs from
// the task's), ErrTampered (the journal does not match the task's audit chain), or ErrStore.
func (g *Gate) ResumeTask(ctx context.Context, id string, opts TaskOptions) (*Task, error) {
	if g.store == nil {
		return nil, ErrNoStore
	}
	if err := checkTaskID(id); err != nil {
		return nil, fmt.Errorf("governance: ResumeTask: %w", err)
	}
	_, data, err := g.verifyTask(ctx, id)
	if err != nil {
		return nil, err
	}
	t := &Task{g: g, id: id, token: newToken(), holder: defaultHolder(opts.Holder), memoSums: data.memos}
	var paused *PausedError
	err = g.store.Update(ctx, func(tx Tx) error {
		paused = nil
		info, err := getTask(tx, id)
		if err != nil {
			return err
		}
		now := g.clock()
		switch {
		case info.State == TaskDone || info.State == TaskFailed:
			return fmt.Errorf("%w: task %s is %s", ErrTaskEnded, id, info.State)
		case info.Fingerprint != opts.Fingerprint:
			return fmt.Errorf("%w: task %s was started with %q; this process runs %q", ErrTaskMismatch, id, info.Fingerprint, opts.Fingerprint)
		case info.State == TaskRunning && now.Before(info.LeaseUntil):
			return fmt.Errorf("%w: task %s is held by %s until %s", ErrTaskBusy, id, info.Holder, info.LeaseUntil.Format(time.RFC3339))
		}
		journal, err := readJournal(tx, id, info.Journal)
		if err != nil {
			return err
		}
		if n := len(journal); n > 0 && journal[n-1].Status == entryStarted {
			// Its process died between starting the call and recording its result: nobody knows whether it took
			// effect, so it waits for a decision instead of being run again.
			e := &journal[n-1]
			e.Status = entryPending
			e.Pending = &PendingCall{TaskID: id, Seq: e.Seq, Tool: e.Tool, Effect: e.Effect, Cost: e.Cost, Since: now,
				Reason: "the process running this call ended before its result was recorded", OutcomeUnknown: true}
			e.Pending.Args, e.Args = e.Args, nil
			if err := putEntry(tx, id, e); err != nil {
				return err
			}
			if err := putPending(tx, e.Pending); err != nil {
				return err
			}
			rec := Record{Version: RecordVersion, Time: now, RunID: id, Seq: e.Seq, Tool: e.Tool, Effect: e.Effect, Cost: e.Cost,
				Args: e.Pending.Args, Decision: "deny", Reason: e.Pending.Reason, DecidedBy: "gate", Outcome: StatusPaused}
			if _, err := appendTaskChain(tx, &info, g.storeKey, rec); err != nil {
				return err
			}
			info.State, info.Pending, info.Updated = TaskPaused, e.Pending, now
			info.Holder, info.Token, info.LeaseUntil = "", "", time.Time{}
			paused = &PausedError{Pending: *e.Pending}
			_, err := putTask(tx, &info)
			return err
		}
		if n := len(journal); n > 0 && journal[n-1].Status == entryPending && journal[n-1].Decision == nil {
			paused = &PausedError{Pending: *journal[n-1].Pending}
			return nil
		}
		meta, _, err := tx.Get(taskMetaKey(id))
		if err != nil {
			return err
		}
		// What was verified above must still be what this process resumes with.
		if sum := sha256.Sum256(meta); data.meta != "" && hex.EncodeToString(sum[:]) != data.meta {
			return dataEdited(id)
		}
		info.State, info.Holder, info.Token, info.LeaseUntil, info.Updated = TaskRunning, t.holder, t.token, now.Add(g.leaseTTL()), now
		info.Runs++
		t.info, t.journal, t.meta = info, journal, meta
		rec, err := putTask(tx, &info)
		t.cacheRecord(rec, &info)
		return err
	})
	if err != nil {
		return nil, err
	}
	if paused != nil {
		return nil, paused
	}
	t.start()
	return t, nil
}

// start makes the task's run and starts renewing its lease.
func (t *Task) start() {
	t.run = &Run{g: t.g, id: t.id, task: t}
	if t.g.newBudget != nil {
		t.run.budget = t.g.newBudget(t.id)
	}
	t.stop, t.stopped = make(chan struct{}), make(chan struct{})
	go t.renew()
}

// renew extends the lease every third of its TTL until the task ends.
func (t *Task) renew() {
	defer close(t.stopped)
	tick := time.NewTicker(t.g.leaseTTL() / 3)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
		}
		t.mu.Lock()
		if t.ended {
			t.mu.Unlock()
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), t.g.leaseTTL()/3)
		err := t.update(ctx, func(tx Tx, info *TaskInfo) error { return nil })
		cancel()
		t.mu.Unlock()
		if errors.Is(err, ErrTaskLost) {
			t.run.halt(err)
			return
		}
	}
}

// update changes the task's record in one transaction, after checking that this process still holds it and
// extending its lease. t.mu is held.
//
// When the store can take the record on trust (AssumeTx), the transaction assumes it is the one this process
// last wrote, and so needs no read before its writes; if another writer changed it, the transaction has no effect
// and runs again, reading it.
func (t *Task) update(ctx context.Context, fn func(tx Tx, info *TaskInfo) error) error {
	assume := t.rec != nil
	for {
		err := t.updateOnce(ctx, assume, fn)
		if assume && errors.Is(err, ErrAssumed) {
			assume = false
			continue
		}
		return err
	}
}

func (t *Task) updateOnce(ctx context.Context, assume bool, fn func(tx Tx, info *TaskInfo) error) error {
	// What the transaction wrote becomes the task's state here only once it committed: a store may run fn and then
	// fail to commit (or run it again), and a record this process keeps must never be ahead of the store's.
	var staged TaskInfo
	var stagedRec []byte
	err := t.g.store.Update(ctx, func(tx Tx) error {
		info, err := t.getRecord(tx, assume)
		if err != nil {
			return err
		}
		if info.Token != t.token || info.State != TaskRunning {
			return fmt.Errorf("%w: task %s is now %s, held by %q", ErrTaskLost, t.id, info.State, info.Holder)
		}
		if err := fn(tx, &info); err != nil {
			return err
		}
		now := t.g.clock()
		info.Updated = now
		if info.State == TaskRunning {
			info.LeaseUntil = now.Add(t.g.leaseTTL())
		}
		rec, err := putTask(tx, &info)
		if err != nil {
			return err
		}
		staged, stagedRec = info, rec
		return nil
	})
	if err != nil {
		return err
	}
	t.info = staged
	t.cacheRecord(stagedRec, &staged)
	return nil
}

// getRecord reads the task's record in tx: decoded, or a copy of recInfo when its bytes are rec's (or, with
// assume and a store that can, when tx assumes they are).
func (t *Task) getRecord(tx Tx, assume bool) (TaskInfo, error) {
	if atx, ok := tx.(AssumeTx); ok && assume && t.rec != nil {
		if err := atx.Assume(taskKey(t.id), t.rec); err != nil {
			return TaskInfo{}, err
		}
		return cloneInfo(&t.recInfo), nil
	}
	v, ok, err := tx.Get(taskKey(t.id))
	switch {
	case err != nil:
		return TaskInfo{}, err
	case ok && t.rec != nil && bytes.Equal(v, t.rec):
		return cloneInfo(&t.recInfo), nil
	}
	return decodeTask(t.id, v, ok)
}

// cacheRecord keeps rec, the bytes of info that a transaction wrote, for getRecord (if that transaction does not
// commit, the store holds other bytes, and getRecord decodes them).
func (t *Task) cacheRecord(rec []byte, info *TaskInfo) {
	if rec == nil {
		return
	}
	t.rec, t.recInfo = rec, cloneInfo(info)
}

// cloneInfo copies info and what a transaction's function may change in place.
func cloneInfo(info *TaskInfo) TaskInfo {
	c := *info
	c.PerTool = maps.Clone(info.PerTool)
	if info.Pending != nil {
		p := *info.Pending
		c.Pending = &p
	}
	return c
}

// ID returns the task's ID.
func (t *Task) ID() string { return t.id }

// Run returns the governance run of the task: pass it as the program's governance run.
func (t *Task) Run() *Run { return t.run }

// Meta returns the caller's data kept with the task (TaskOptions.Meta of NewTask).
func (t *Task) Meta() []byte { return bytes.Clone(t.meta) }

// SetMeta replaces the caller's data kept with the task (a Session's task adds each Exec's code to it before
// the Exec runs). At most MaxTaskMeta bytes.
func (t *Task) SetMeta(ctx context.Context, meta []byte) error {
	if len(meta) > MaxTaskMeta {
		return fmt.Errorf("governance: task %s: Meta of %d bytes (max %d)", t.id, len(meta), MaxTaskMeta)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return fmt.Errorf("%w: task %s was ended by this process", ErrTaskLost, t.id)
	}
	err := t.update(ctx, func(tx Tx, info *TaskInfo) error {
		if err := tx.Put(taskMetaKey(t.id), meta); err != nil {
			return err
		}
		_, err := appendTaskChain(tx, info, t.g.storeKey, dataRecord(t.id, info.Journal, StatusMeta, nil, meta, t.g.clock()))
		return err
	})
	if err == nil {
		t.meta = bytes.Clone(meta)
	}
	return err
}

// Memo records the result of a step of the task that is not a tool call but must come out the same when the
// task is replayed (an agent's model turn): the n-th Memo of a run returns what the n-th Memo of the task's
// first run recorded, and calls fn only when there is none yet. fn's result is kept in the store (at most
// MaxStoreValueBytes). Memo is not governed (no policy, budget or audit record): use Run.Do for what is a
// tool call.
func (t *Task) Memo(ctx context.Context, fn func(ctx context.Context) ([]byte, error)) ([]byte, error) {
	t.mu.Lock()
	if t.ended {
		t.mu.Unlock()
		return nil, fmt.Errorf("%w: task %s was ended by this process", ErrTaskLost, t.id)
	}
	t.memoN++
	n := int64(t.memoN)
	key := taskMemoKey(t.id, n)
	want := t.memoSums[n]
	t.mu.Unlock()
	var v []byte
	var ok bool
	if err := t.g.store.View(ctx, func(tx Tx) error {
		var err error
		v, ok, err = tx.Get(key)
		return err
	}); err != nil {
		return nil, err
	}
	if ok {
		if sum := sha256.Sum256(v); want != "" && hex.EncodeToString(sum[:]) != want {
			return nil, fmt.Errorf("%w: task %s: memo %d is not the result the audit chain recorded", ErrTampered, t.id, n)
		}
		return v, nil
	}
	out, err := fn(ctx)
	if err != nil {
		return nil, err
	}
	if err := CheckStoreValue(out); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	err = t.update(ctx, func(tx Tx, info *TaskInfo) error {
		if err := tx.Put(key, out); err != nil {
			return err
		}
		args, _ := json.Marshal(map[string]int64{"memo": n})
		_, err := appendTaskChain(tx, info, t.g.storeKey, dataRecord(t.id, info.Journal, StatusMemo, args, out, t.g.clock()))
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Replay returns how many calls the journal answers before the run makes new ones.
func (t *Task) Replay() int { return len(t.journal) }

// Info returns the task's state as this process last wrote or read it.
func (t *Task) Info() TaskInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	info := t.info
	info.Token = ""
	info.PerTool = maps.Clone(info.PerTool)
	return info
}

// Used returns the program time the task used in its earlier runs.
func (t *Task) Used() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.info.Used
}

// End closes the task's run in this process: used is the program time this run took (added to the task's).
// If the run paused, the task stays paused (it waits for its decision); otherwise failure, when not empty,
// marks it failed with that error text, and an empty failure marks it done. End releases the lease, and it is
// safe to call more than once (later calls do nothing). A task whose lease was lost is left to its new holder.
func (t *Task) End(ctx context.Context, used time.Duration, failure string) error {
	t.mu.Lock()
	if t.ended {
		t.mu.Unlock()
		return nil
	}
	t.ended = true
	close(t.stop)
	paused := t.info.State == TaskPaused
	var err error
	if !paused {
		err = t.update(ctx, func(tx Tx, info *TaskInfo) error {
			info.Used += used
			info.State = TaskDone
			if failure != "" {
				info.State, info.Error = TaskFailed, truncateUTF8(failure, maxErrorBytes)
			}
			info.Holder, info.Token, info.LeaseUntil = "", "", time.Time{}
			return nil
		})
	} else {
		var total time.Duration
		err = t.g.store.Update(ctx, func(tx Tx) error {
			info, err := getTask(tx, t.id)
			if err != nil {
				return err
			}
			info.Used += used
			total = info.Used
			_, err = putTask(tx, &info)
			return err
		})
		if err == nil {
			t.info.Used = total
		}
	}
	t.mu.Unlock()
	<-t.stopped
	return err
}

// LiveTime returns the part of this process's run of the task, which has lasted d so far, that was not a
// replay of the task's earlier runs: the time since the run's first call that the journal did not answer (all of
// d for a task without a journal, none while it still replays). It is the program time to charge the task.
func (t *Task) LiveTime(d time.Duration) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case len(t.journal) == 0:
		return d
	case t.replayEnded.IsZero():
		return 0
	}
	return min(time.Since(t.replayEnded), d)
}

// Halted is [Run.Halted] of the task's run.
func (t *Task) Halted() error { return t.run.Halted() }

// do passes one call of the task's run through the gate: from the journal while it has the call, new otherwise.
func (t *Task) do(ctx context.Context, call Call, tool ToolFunc) (Outcome, error) {
	r := t.run
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := r.Halted(); err != nil {
		return Outcome{Call: call, Status: StatusDenied}, err
	}
	if t.ended {
		return r.haltWith(call, fmt.Errorf("%w: task %s was ended by this process", ErrTaskLost, t.id))
	}
	call.RunID = t.id
	call.Seq = r.seq.Add(1)
	if t.replayEnded.IsZero() && int(call.Seq) >= len(t.journal) && (int(call.Seq) > len(t.journal) || t.journal[call.Seq-1].Status == entryPending) {
		t.replayEnded = time.Now()
	}
	argsSum := sha256.Sum256(call.Args)
	if int(call.Seq) <= len(t.journal) {
		e := t.journal[call.Seq-1]
		if e.Tool != call.Tool || e.ArgsSHA256 != hex.EncodeToString(argsSum[:]) {
			return r.haltWith(call, fmt.Errorf("%w: call %d is %s with other arguments or another tool than the journal's %s (the program, its input or the interpreter changed)",
				ErrDiverged, call.Seq, quoteName(call.Tool), quoteName(e.Tool)))
		}
		call.Effect, call.Cost = e.Effect, e.Cost
		switch e.Status {
		case entryOK:
			return Outcome{Call: call, Decision: Decision{Allow: true, Reason: "replayed from the journal", DecidedBy: e.DecidedBy}, Status: StatusOK, Result: e.Result}, nil
		case entryFailed:
			return Outcome{Call: call, Decision: Decision{Allow: true, Reason: "replayed from the journal", DecidedBy: e.DecidedBy}, Status: StatusFailed},
				&ToolError{Tool: call.Tool, RunID: call.RunID, Seq: call.Seq, Err: errors.New(e.Error)}
		case entryDenied:
			return Outcome{Call: call, Decision: Decision{Reason: e.Reason, DecidedBy: e.DecidedBy}, Status: StatusDenied},
				&DeniedError{Tool: call.Tool, RunID: call.RunID, Seq: call.Seq, Reason: e.Reason, DecidedBy: e.DecidedBy, Kind: kindByName(e.Kind)}
		case entryPending:
			if e.Decision == nil {
				return r.haltWith(call, &PausedError{Pending: *e.Pending})
			}
			return t.live(ctx, call, tool, &e)
		}
		return r.haltWith(call, fmt.Errorf("%w: journal entry %d has status %q", ErrTampered, call.Seq, e.Status))
	}
	return t.live(ctx, call, tool, nil)
}

// kinds are the denial sentinels by the name a journal keeps.
var kinds = map[string]error{
	"denied": ErrDenied, "approval_denied": ErrApprovalDenied, "budget": ErrBudgetExceeded, "tool_limit": ErrToolLimit,
	"invalid": ErrInvalidCall, "audit": ErrAudit, "outcome_unknown": ErrOutcomeUnknown, "flood": ErrCallFlood,
	"approval_timeout": ErrApprovalTimeout,
}

func kindByName(s string) error {
	if k, ok := kinds[s]; ok {
		return k
	}
	return ErrDenied
}

func kindName(err error) string {
	for n, k := range kinds {
		if errors.Is(err, k) && k != ErrToolLimit {
			return n
		}
	}
	if errors.Is(err, ErrToolLimit) {
		return "tool_limit"
	}
	return "denied"
}

// live runs a call that the journal does not answer: e is the journal's pending entry for it (decided), or nil
// for a new call.
func (t *Task) live(ctx context.Context, call Call, tool ToolFunc, e *journalEntry) (Outcome, error) {
	g, r := t.g, t.run
	if invalid := g.validate(call, tool); invalid != "" {
		return t.denyNew(ctx, call, ErrInvalidCall, "gate", invalid)
	}
	if err := ctx.Err(); err != nil {
		return Outcome{Call: call, Status: StatusDenied}, &DeniedError{Tool: call.Tool, RunID: call.RunID, Seq: call.Seq,
			Reason: "the call's context ended before it was decided", DecidedBy: "gate", Kind: err, Err: err}
	}
	var dec *TaskDecision
	v := Verdict{Action: Allow}
	if e != nil {
		dec = e.Decision
		call.Effect, call.Cost = e.Effect, e.Cost
		if !dec.Allow {
			kind := ErrApprovalDenied
			reason := orDefault(dec.Reason, "denied by the approver")
			if e.Pending != nil && e.Pending.OutcomeUnknown {
				kind, reason = ErrOutcomeUnknown, "not run again: its outcome is unknown and the decision was to deny it ("+reason+")"
			}
			return t.finishDenied(ctx, call, e, kind, orDefault(dec.DecidedBy, "approver"), reason)
		}
	} else {
		var err error
		v, err = g.evaluate(ctx, call)
		call.Effect = call.Effect.Stricter(v.Effect).Resolve()
		call.Cost = max(call.Cost, v.Cost)
		switch {
		case err != nil:
			return t.denyNew(ctx, call, ErrDenied, "policy", "policy error: "+err.Error())
		case v.Action == Deny:
			return t.denyNew(ctx, call, ErrDenied, "policy", orDefault(v.Reason, "denied by policy"))
		case v.Action != Allow && v.Action != NeedsApproval && v.Action != Pause:
			return t.denyNew(ctx, call, ErrDenied, "policy", "policy returned an unknown action "+v.Action.String())
		}
	}
	display := g.redactArgs(call.Tool, call.Args)
	now := g.clock()
	argsSum := sha256.Sum256(call.Args)
	call.IdempotencyKey = t.id + "/" + strconv.FormatInt(call.Seq, 10)

	// Limits, budget, and the journal's "started" (or "pending") entry with the "allowed" record: one
	// transaction, so that replicas never overspend and a call is either booked and recorded or neither.
	settle := func(CallReport) {}
	if r.budget != nil {
		s, err := reserveBudget(ctx, r.budget, call)
		if err != nil {
			return t.denyNew(ctx, call, ErrBudgetExceeded, "budget", "budget: "+err.Error())
		}
		if s != nil {
			settle = func(c CallReport) { safeSettle(g.log, s, c) }
		}
	}
	var refused, refusedKind string
	var pending *PendingCall
	rec := g.baseRecordAt(call, now)
	rec.RunID = t.id
	g.setArgs(&rec, display)
	by, reason := "policy", orDefault(v.Reason, "allowed by policy")
	if dec != nil {
		by, reason = orDefault(dec.DecidedBy, "approver"), orDefault(dec.Reason, "approved")
	}
	ar := rec
	ar.Decision, ar.Reason, ar.DecidedBy, ar.Outcome = "allow", reason, by, StatusAllowed
	err := t.update(ctx, func(tx Tx, info *TaskInfo) error {
		refused, refusedKind, pending = "", "", nil
		if e == nil {
			info.Calls++ // a call is counted once, when it first reaches the gate
		}
		if why, kind := t.limits(info, call); why != "" {
			refused, refusedKind = why, kind
			info.Denied++
			if e != nil {
				info.Pending = nil
				if err := tx.Delete(pendingKey(t.id, call.Seq)); err != nil {
					return err
				}
			}
			return t.recordDenied(tx, info, call, rec, kind, "budget", why)
		}
		if e == nil && (v.Action == NeedsApproval || v.Action == Pause) {
			pending = &PendingCall{TaskID: t.id, Seq: call.Seq, Tool: call.Tool, Args: display, Effect: call.Effect, Cost: call.Cost,
				Reason: orDefault(v.Reason, "approval required"), Since: now}
			ne := journalEntry{Seq: call.Seq, Tool: call.Tool, ArgsSHA256: hex.EncodeToString(argsSum[:]), Effect: call.Effect,
				Cost: call.Cost, Status: entryPending, Pending: pending}
			if err := putEntry(tx, t.id, &ne); err != nil {
				return err
			}
			if err := putPending(tx, pending); err != nil {
				return err
			}
			pr := rec
			pr.Decision, pr.Reason, pr.DecidedBy, pr.Outcome = "deny", pending.Reason, "policy", StatusPaused
			if _, err := appendTaskChain(tx, info, g.storeKey, pr); err != nil {
				return err
			}
			info.Journal = max(info.Journal, call.Seq)
			info.State, info.Pending = TaskPaused, pending
			info.Holder, info.Token, info.LeaseUntil = "", "", time.Time{}
			return nil
		}
		info.CostUnits += call.Cost
		if call.Effect == Irreversible {
			info.Irrev++
		}
		if info.PerTool == nil {
			info.PerTool = map[string]int64{}
		}
		info.PerTool[call.Tool]++
		if dec != nil {
			info.Pending = nil
			if err := tx.Delete(pendingKey(t.id, call.Seq)); err != nil {
				return err
			}
		}
		ne := journalEntry{Seq: call.Seq, Tool: call.Tool, ArgsSHA256: hex.EncodeToString(argsSum[:]), Effect: call.Effect,
			Cost: call.Cost, Status: entryStarted, DecidedBy: by, Reason: reason, Decision: dec, Args: display}
		if e != nil {
			ne.Pending = e.Pending
		}
		if err := putEntry(tx, t.id, &ne); err != nil {
			return err
		}
		info.Journal = max(info.Journal, call.Seq)
		_, err := appendTaskChain(tx, info, g.storeKey, ar)
		return err
	})
	if err != nil {
		settle(CallReport{})
		return r.haltWith(call, fmt.Errorf("governance: task %s: call %d not run: %w", t.id, call.Seq, err))
	}
	if refused != "" {
		settle(CallReport{})
		if t.info.Denied >= g.maxDenied {
			r.flooded.Store(true)
		}
		return Outcome{Call: call, Decision: Decision{Reason: refused, DecidedBy: "budget"}, Status: StatusDenied},
			&DeniedError{Tool: call.Tool, RunID: call.RunID, Seq: call.Seq, Reason: refused, DecidedBy: "budget", Kind: kindByName(refusedKind)}
	}
	if pending != nil {
		settle(CallReport{})
		t.info.State = TaskPaused
		return r.haltWith(call, &PausedError{Pending: *pending})
	}
	t.mirror(ctx, ar, "", "")

	// The tool, with the call's idempotency key in its context too.
	start := time.Now()
	// The lease is renewed while the tool runs (renew takes t.mu), however long it takes.
	t.mu.Unlock()
	res, terr := runTool(withIdempotencyKey(ctx, call.IdempotencyKey), call, tool)
	t.mu.Lock()
	dur := time.Since(start)
	settle(CallReport{Ran: true, Failed: terr != nil, Duration: dur, ResultSize: len(res)})

	out := Outcome{Call: call, Decision: Decision{Allow: true, Reason: reason, DecidedBy: by}, Status: StatusOK, Result: res, Duration: dur}
	orec := ar
	orec.Time = g.clock()
	orec.Decision, orec.Outcome, orec.Duration = "allow", StatusOK, dur
	ne := journalEntry{Seq: call.Seq, Tool: call.Tool, ArgsSHA256: hex.EncodeToString(argsSum[:]), Effect: call.Effect, Cost: call.Cost,
		Status: entryOK, DecidedBy: by, Reason: reason, Decision: dec}
	if e != nil {
		ne.Pending = e.Pending
	}
	if terr != nil {
		out.Status = StatusFailed
		orec.Outcome = StatusFailed
		orec.Error = truncateUTF8(terr.Error(), maxErrorBytes)
		ne.Status, ne.Error = entryFailed, orec.Error
	} else {
		sum := sha256.Sum256(res)
		orec.ResultSize, orec.ResultSHA256 = int64(len(res)), hex.EncodeToString(sum[:])
		ne.Result = res
	}
	err = t.update(context.WithoutCancel(ctx), func(tx Tx, info *TaskInfo) error {
		if err := putEntry(tx, t.id, &ne); err != nil {
			return err
		}
		_, err := appendTaskChain(tx, info, g.storeKey, orec)
		return err
	})
	if err != nil {
		// The tool ran but its outcome is not in the store: the program must not go on as if it were (a resume
		// would then not know it), so the run ends; its resume asks for a decision on this call.
		return r.haltWith(call, fmt.Errorf("governance: task %s: the result of call %d could not be recorded: %w", t.id, call.Seq, err))
	}
	t.mirror(ctx, orec, "", "")
	return out, terr
}

// mirror gives the gate's own auditor a copy of a task's record (the store's chain is the task's log of
// record; a failure here is logged, not fatal).
func (t *Task) mirror(ctx context.Context, rec Record, decision string, status Status) {
	if decision != "" {
		rec.Decision, rec.Outcome = decision, status
	}
	if err := t.g.record(context.WithoutCancel(ctx), &rec); err != nil {
		t.g.log.Error("governance: task record not mirrored to the gate's auditor", "task", t.id, "seq", rec.Seq, "error", err)
	}
}

// limits applies the gate's Limits to call against the task's counters; it returns why it is refused and the
// denial's kind name, or "".
func (t *Task) limits(info *TaskInfo, call Call) (string, string) {
	l := &t.g.limits
	switch {
	case info.Denied >= t.g.maxDenied:
		return "the task has had " + strconv.FormatInt(info.Denied, 10) + " denied calls (max_denied_calls); every further call is refused", "flood"
	case info.Calls > t.g.maxCalls:
		return "max_tool_calls (" + strconv.FormatInt(t.g.maxCalls, 10) + ") reached", "tool_limit"
	}
	if limit, ok := l.ToolCaps[call.Tool]; ok && info.PerTool[call.Tool] >= max(limit, 0) {
		return "max calls of this tool per run (" + strconv.FormatInt(max(limit, 0), 10) + ") reached", "budget"
	}
	if call.Cost > 0 && l.MaxCostUnits != 0 && (l.MaxCostUnits < 0 || call.Cost > l.MaxCostUnits-info.CostUnits) {
		return fmt.Sprintf("cost units: %d used + %d would exceed max %d", info.CostUnits, call.Cost, max(l.MaxCostUnits, 0)), "budget"
	}
	if call.Effect == Irreversible && l.MaxIrreversible != 0 && info.Irrev >= max(l.MaxIrreversible, 0) {
		return "max irreversible calls per run (" + strconv.FormatInt(max(l.MaxIrreversible, 0), 10) + ") reached", "budget"
	}
	return "", ""
}

// recordDenied journals and audits a denied new call within tx.
func (t *Task) recordDenied(tx Tx, info *TaskInfo, call Call, rec Record, kind, by, reason string) error {
	sum := sha256.Sum256(call.Args)
	ne := journalEntry{Seq: call.Seq, Tool: call.Tool, ArgsSHA256: hex.EncodeToString(sum[:]), Effect: call.Effect, Cost: call.Cost,
		Status: entryDenied, Kind: kind, Reason: reason, DecidedBy: by}
	if err := putEntry(tx, t.id, &ne); err != nil {
		return err
	}
	info.Journal = max(info.Journal, call.Seq)
	rec.Decision, rec.Reason, rec.DecidedBy, rec.Outcome = "deny", reason, by, StatusDenied
	_, err := appendTaskChain(tx, info, t.g.storeKey, rec)
	return err
}

// denyNew records and returns the denial of a new call.
func (t *Task) denyNew(ctx context.Context, call Call, kind error, by, reason string) (Outcome, error) {
	g := t.g
	rec := g.newRecord(call, kind != ErrInvalidCall)
	rec.RunID = t.id
	err := t.update(ctx, func(tx Tx, info *TaskInfo) error {
		info.Denied++
		if kind != ErrInvalidCall {
			info.Calls++
		}
		return t.recordDenied(tx, info, call, rec, kindName(kind), by, reason)
	})
	if err != nil {
		return t.run.haltWith(call, fmt.Errorf("governance: task %s: denial of call %d not recorded: %w", t.id, call.Seq, err))
	}
	if t.info.Denied >= g.maxDenied {
		t.run.flooded.Store(true)
	}
	return Outcome{Call: call, Decision: Decision{Reason: reason, DecidedBy: by}, Status: StatusDenied},
		&DeniedError{Tool: call.Tool, RunID: call.RunID, Seq: call.Seq, Reason: reason, DecidedBy: by, Kind: kind}
}

// finishDenied records the denial of a pending call that was decided "deny".
func (t *Task) finishDenied(ctx context.Context, call Call, e *journalEntry, kind error, by, reason string) (Outcome, error) {
	g := t.g
	rec := g.newRecord(call, true)
	rec.RunID = t.id
	rec.Args = e.Pending.Args
	err := t.update(ctx, func(tx Tx, info *TaskInfo) error {
		info.Denied++
		info.Pending = nil
		if err := tx.Delete(pendingKey(t.id, call.Seq)); err != nil {
			return err
		}
		ne := *e
		ne.Status, ne.Kind, ne.Reason, ne.DecidedBy = entryDenied, kindName(kind), reason, by
		if err := putEntry(tx, t.id, &ne); err != nil {
			return err
		}
		rec.Decision, rec.Reason, rec.DecidedBy, rec.Outcome = "deny", reason, by, StatusDenied
		_, err := appendTaskChain(tx, info, g.storeKey, rec)
		return err
	})
	if err != nil {
		return t.run.haltWith(call, fmt.Errorf("governance: task %s: denial of call %d not recorded: %w", t.id, call.Seq, err))
	}
	return Outcome{Call: call, Decision: Decision{Reason: reason, DecidedBy: by}, Status: StatusDenied},
		&DeniedError{Tool: call.Tool, RunID: call.RunID, Seq: call.Seq, Reason: reason, DecidedBy: by, Kind: kind}
}

// appendTaskChain appends rec to the audit chain of the task info describes, whose head the task's record
// keeps (so that a call's records cost no read and write of a head of their own); the caller writes info.
func appendTaskChain(tx Tx, info *TaskInfo, key []byte, rec Record) (Record, error) {
	rec, line, err := encodeChained(chainState{Hash: info.AuditHead, Count: info.AuditRecords}, key, rec)
	if err != nil {
		return rec, err
	}
	n := info.AuditRecords + 1
	if err := tx.Put(chainRecordKey(taskChain(info.ID), n), line); err != nil {
		return rec, err
	}
	info.AuditHead, info.AuditRecords = rec.Hash, n
	return rec, nil
}

func getTask(tx Tx, id string) (TaskInfo, error) {
	v, ok, err := tx.Get(taskKey(id))
	if err != nil {
		return TaskInfo{}, err
	}
	return decodeTask(id, v, ok)
}

// decodeTask decodes the record v of task id (ok: it exists).
func decodeTask(id string, v []byte, ok bool) (TaskInfo, error) {
	var info TaskInfo
	if !ok {
		return info, fmt.Errorf("%w: %s", ErrTaskUnknown, id)
	}
	if err := json.Unmarshal(v, &info); err != nil {
		return info, fmt.Errorf("%w: task %s: corrupt record: %w", ErrTampered, id, err)
	}
	if info.ID != id {
		return info, fmt.Errorf("%w: task record %s names task %q", ErrTampered, id, info.ID)
	}
	return info, nil
}

// putTask writes info as the task's record and returns the bytes written.
func putTask(tx Tx, info *TaskInfo) ([]byte, error) {
	v, err := json.Marshal(info)
	if err != nil {
		return nil, err
	}
	if err := tx.Put(taskKey(info.ID), v); err != nil {
		return nil, err
	}
	return v, nil
}

func putEntry(tx Tx, id string, e *journalEntry) error {
	v, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return tx.Put(taskEntryKey(id, e.Seq), v)
}

func putPending(tx Tx, p *PendingCall) error {
	v, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return tx.Put(pendingKey(p.TaskID, p.Seq), v)
}

// readJournal reads the n entries of a task's journal; each must be at its position.
func readJournal(tx Tx, id string, n int64) ([]journalEntry, error) {
	out := make([]journalEntry, 0, min(n, 1<<16))
	after := ""
	for {
		kvs, err := tx.Scan("t/"+id+"/j/", after, 0)
		if err != nil {
			return nil, err
		}
		for _, kv := range kvs {
			var e journalEntry
			if err := json.Unmarshal(kv.Value, &e); err != nil {
				return nil, fmt.Errorf("%w: task %s: corrupt journal entry %s: %w", ErrTampered, id, kv.Key, err)
			}
			if e.Seq != int64(len(out))+1 || kv.Key != taskEntryKey(id, e.Seq) {
				return nil, fmt.Errorf("%w: task %s: journal entry %s out of place", ErrTampered, id, kv.Key)
			}
			out = append(out, e)
		}
		if len(kvs) < MaxStoreScan {
			break
		}
		after = kvs[len(kvs)-1].Key
	}
	if int64(len(out)) != n {
		return nil, fmt.Errorf("%w: task %s: the journal holds %d entries, the task record says %d", ErrTampered, id, len(out), n)
	}
	return out, nil
}

// Decide records a decision on a pending call of a task, once: a second decision, or one for a call that is
// not pending, is refused. The decision is written to the task's audit chain; the task can then be resumed.
//
// # Errors
//
// ErrTaskUnknown, ErrNotPending, ErrAlreadyDecided, or ErrStore.
func (g *Gate) Decide(ctx context.Context, taskID string, seq int64, d TaskDecision) error {
	if g.store == nil {
		return ErrNoStore
	}
	if err := checkTaskID(taskID); err != nil {
		return fmt.Errorf("governance: Decide: %w", err)
	}
	if d.Time.IsZero() {
		d.Time = g.clock()
	}
	d.DecidedBy = truncateUTF8(orDefault(d.DecidedBy, "approver"), 200)
	d.Reason = truncateUTF8(d.Reason, maxErrorBytes)
	return g.store.Update(ctx, func(tx Tx) error {
		info, err := getTask(tx, taskID)
		if err != nil {
			return err
		}
		if seq < 1 || seq > info.Journal {
			return fmt.Errorf("%w: task %s has no call %d", ErrNotPending, taskID, seq)
		}
		v, ok, err := tx.Get(taskEntryKey(taskID, seq))
		if err != nil {
			return err
		}
		var e journalEntry
		if !ok || json.Unmarshal(v, &e) != nil {
			return fmt.Errorf("%w: task %s: journal entry %d missing or corrupt", ErrTampered, taskID, seq)
		}
		switch {
		case e.Decision != nil:
			verb := "denied"
			if e.Decision.Allow {
				verb = "allowed"
			}
			return fmt.Errorf("%w: call %d of task %s was %s by %s", ErrAlreadyDecided, seq, taskID, verb, e.Decision.DecidedBy)
		case e.Status != entryPending:
			return fmt.Errorf("%w: call %d of task %s is %s, not waiting for a decision", ErrNotPending, seq, taskID, e.Status)
		}
		e.Decision = &d
		if err := putEntry(tx, taskID, &e); err != nil {
			return err
		}
		if err := tx.Delete(pendingKey(taskID, seq)); err != nil {
			return err
		}
		decision := "deny"
		if d.Allow {
			decision = "allow"
		}
		rec := Record{Version: RecordVersion, Time: d.Time.UTC(), RunID: taskID, Seq: seq, Tool: e.Tool, Effect: e.Effect, Cost: e.Cost,
			Args: e.Pending.Args, Decision: decision, Reason: d.Reason, DecidedBy: d.DecidedBy, Outcome: StatusDecided}
		g.setArgs(&rec, e.Pending.Args)
		if _, err := appendTaskChain(tx, &info, g.storeKey, rec); err != nil {
			return err
		}
		info.Pending = nil
		info.Updated = g.clock()
		_, err = putTask(tx, &info)
		return err
	})
}

// TaskInfo returns a task's state.
func (g *Gate) TaskInfo(ctx context.Context, id string) (TaskInfo, error) {
	if g.store == nil {
		return TaskInfo{}, ErrNoStore
	}
	if err := checkTaskID(id); err != nil {
		return TaskInfo{}, err
	}
	var info TaskInfo
	err := g.store.View(ctx, func(tx Tx) error {
		var err error
		info, err = getTask(tx, id)
		return err
	})
	info.Token = ""
	return info, err
}

// PendingCalls lists the calls waiting for a decision, across the store's tasks, in task and call order,
// starting after the pair (afterTask, afterSeq) ("" and 0 from the start), at most limit (ScanLimit).
func (g *Gate) PendingCalls(ctx context.Context, afterTask string, afterSeq int64, limit int) ([]PendingCall, error) {
	if g.store == nil {
		return nil, ErrNoStore
	}
	after := ""
	if afterTask != "" {
		after = pendingKey(afterTask, afterSeq)
	}
	var out []PendingCall
	err := g.store.View(ctx, func(tx Tx) error {
		kvs, err := tx.Scan("q/", after, limit)
		if err != nil {
			return err
		}
		for _, kv := range kvs {
			var p PendingCall
			if err := json.Unmarshal(kv.Value, &p); err != nil {
				return fmt.Errorf("%w: pending call %s corrupt: %w", ErrTampered, kv.Key, err)
			}
			out = append(out, p)
		}
		return nil
	})
	return out, err
}

// TaskRecords returns the records of a task's audit chain from position from (1-based), at most limit.
func (g *Gate) TaskRecords(ctx context.Context, id string, from int64, limit int) ([]Record, error) {
	if g.store == nil {
		return nil, ErrNoStore
	}
	if err := checkTaskID(id); err != nil {
		return nil, err
	}
	return StoreChainRecords(ctx, g.store, taskChain(id), from, limit)
}

// VerifyTask verifies a task's audit chain (with GateConfig.StoreAuditKey) and that its journal agrees with
// it: every recorded result is the one whose SHA-256 the chain holds, every decision is the chain's. An edit of
// the journal, the chain or the task's record is an error wrapping ErrTampered.
//
// It also checks the data kept with the task against the chain's records of it: the caller's data
// (TaskOptions.Meta, Task.SetMeta: the program a resume runs, a Session's Execs) must be the last that the chain
// recorded, and every Memo result must be the one the chain recorded, with none removed. Tasks started by a
// version of this package that did not record their data have no such records, and their data is not checked.
func (g *Gate) VerifyTask(ctx context.Context, id string) (VerifyReport, error) {
	rep, _, err := g.verifyTask(ctx, id)
	return rep, err
}

// taskData is what the audit chain of a task says of the data kept with it.
type taskData struct {
	meta  string           // SHA-256 (hex) of the task's data as last recorded; "" if never recorded
	memos map[int64]string // SHA-256 (hex) of each Memo result by its number
}

func (g *Gate) verifyTask(ctx context.Context, id string) (VerifyReport, taskData, error) {
	data := taskData{memos: map[int64]string{}}
	if g.store == nil {
		return VerifyReport{}, data, ErrNoStore
	}
	if err := checkTaskID(id); err != nil {
		return VerifyReport{}, data, err
	}
	rep, err := verifyChain(ctx, g.store, taskChain(id), g.storeKey, func(tx Tx) (chainState, error) {
		info, err := getTask(tx, id)
		return chainState{Hash: info.AuditHead, Count: info.AuditRecords}, err
	})
	if err != nil {
		return rep, data, fmt.Errorf("governance: task %s: audit chain: %w", id, err)
	}
	return rep, data, g.store.View(ctx, func(tx Tx) error {
		clear(data.memos)
		data.meta = ""
		info, err := getTask(tx, id)
		if err != nil {
			return err
		}
		journal, err := readJournal(tx, id, info.Journal)
		if err != nil {
			return err
		}
		// The last record of each kind per call.
		type seen struct{ outcome, decided *Record }
		bySeq := map[int64]*seen{}
		var from int64 = 1
		for {
			recs, err := StoreChainRecords(ctx, g.store, taskChain(id), from, 0)
			if err != nil {
				return err
			}
			for i := range recs {
				rc := recs[i]
				s := bySeq[rc.Seq]
				if s == nil {
					s = &seen{}
					bySeq[rc.Seq] = s
				}
				switch rc.Outcome {
				case StatusOK, StatusFailed, StatusDenied:
					s.outcome = &rc
				case StatusDecided:
					s.decided = &rc
				case StatusMeta:
					data.meta = rc.ResultSHA256
				case StatusMemo:
					var a struct {
						Memo int64 `json:"memo"`
					}
					if err := json.Unmarshal(rc.Args, &a); err != nil || a.Memo < 1 {
						return fmt.Errorf("%w: task %s: a memo record of the audit chain names no memo (%s)", ErrTampered, id, rc.Args)
					}
					data.memos[a.Memo] = rc.ResultSHA256
				}
			}
			if len(recs) < MaxStoreScan {
				break
			}
			from += int64(len(recs))
		}
		for _, e := range journal {
			s := bySeq[e.Seq]
			bad := func(why string) error {
				return fmt.Errorf("%w: task %s: journal entry %d (%s) %s", ErrTampered, id, e.Seq, e.Status, why)
			}
			if s == nil {
				return bad("has no record in the audit chain")
			}
			if e.Decision != nil {
				want := "deny"
				if e.Decision.Allow {
					want = "allow"
				}
				if s.decided == nil || s.decided.Decision != want || s.decided.DecidedBy != e.Decision.DecidedBy {
					return bad("carries a decision the audit chain does not")
				}
			}
			switch e.Status {
			case entryOK:
				sum := sha256.Sum256(e.Result)
				if s.outcome == nil || s.outcome.Outcome != StatusOK || s.outcome.ResultSHA256 != hex.EncodeToString(sum[:]) || s.outcome.Tool != truncateUTF8(e.Tool, maxToolNameBytes) {
					return bad("holds a result that the audit chain did not record")
				}
			case entryFailed:
				if s.outcome == nil || s.outcome.Outcome != StatusFailed || s.outcome.Error != e.Error {
					return bad("holds a failure that the audit chain did not record")
				}
			case entryDenied:
				if s.outcome == nil || s.outcome.Outcome != StatusDenied {
					return bad("holds a denial that the audit chain did not record")
				}
			}
		}
		return checkTaskData(tx, id, data)
	})
}

func dataEdited(id string) error {
	return fmt.Errorf("%w: task %s: the data kept with it (what a resume runs) is not what the audit chain recorded", ErrTampered, id)
}

// checkTaskData checks the data kept with task id against what its audit chain recorded of it.
func checkTaskData(tx Tx, id string, data taskData) error {
	if data.meta != "" {
		meta, _, err := tx.Get(taskMetaKey(id))
		if err != nil {
			return err
		}
		if sum := sha256.Sum256(meta); hex.EncodeToString(sum[:]) != data.meta {
			return dataEdited(id)
		}
	}
	seen := 0
	after := ""
	for {
		kvs, err := tx.Scan("t/"+id+"/s/", after, 0)
		if err != nil {
			return err
		}
		for _, kv := range kvs {
			n, err := strconv.ParseInt(strings.TrimPrefix(kv.Key, "t/"+id+"/s/"), 10, 64)
			if err != nil || kv.Key != taskMemoKey(id, n) {
				return fmt.Errorf("%w: task %s: memo key %q out of place", ErrTampered, id, kv.Key)
			}
			want, ok := data.memos[n]
			if !ok && data.meta == "" && len(data.memos) == 0 {
				continue // a task from before memos were recorded in the chain
			}
			if sum := sha256.Sum256(kv.Value); !ok || hex.EncodeToString(sum[:]) != want {
				return fmt.Errorf("%w: task %s: memo %d is not a result the audit chain recorded", ErrTampered, id, n)
			}
			seen++
		}
		if len(kvs) < MaxStoreScan {
			break
		}
		after = kvs[len(kvs)-1].Key
	}
	if seen != len(data.memos) {
		return fmt.Errorf("%w: task %s: the audit chain recorded %d memo results, the store holds %d of them", ErrTampered, id, len(data.memos), seen)
	}
	return nil
}

type idemKey struct{}

func withIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idemKey{}, key)
}

// IdempotencyKey returns the idempotency key of the tool call whose context ctx is ("" outside a durable
// task's call). It is the same however often the call is run: a tool that takes effect outside (a payment, an
// email) should pass it on so that a call run again after its outcome was unknown is not done twice.
func IdempotencyKey(ctx context.Context) string {
	k, _ := ctx.Value(idemKey{}).(string)
	return k
}
