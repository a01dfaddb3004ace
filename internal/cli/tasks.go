package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/internal/termsafe"
	"github.com/wasmbox/wasmbox/store"
)

// exitPaused is the CLI's exit code for a durable task that paused at a call waiting for a decision
// (EX_TEMPFAIL of sysexits.h: try again later). It is reserved like the others.
const exitPaused = 75

// storeFlags are the flags that name a durable-task store.
type storeFlags struct {
	url     string
	keyFile string
	keyEnv  string
}

func (s *storeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.url, "store", "", "durable-task store URL: sqlite:PATH or postgres://... (also WASMBOX_STORE); with it, a call that needs approval pauses the run instead of waiting")
	fs.StringVar(&s.keyFile, "store-key-file", "", "HMAC key of the tasks' audit chains, from FILE (one trailing newline ignored); every process of the store must use the same")
	fs.StringVar(&s.keyEnv, "store-key-env", "", "HMAC key of the tasks' audit chains, from the environment variable VAR")
}

// resolve fills the URL from WASMBOX_STORE when the flag was not given.
func (s *storeFlags) resolve() {
	if s.url == "" {
		s.url = os.Getenv("WASMBOX_STORE")
	}
}

// key reads the HMAC key, if any.
func (s *storeFlags) key() ([]byte, error) {
	switch {
	case s.keyFile != "" && s.keyEnv != "":
		return nil, errors.New("use --store-key-file or --store-key-env, not both")
	case s.keyFile != "":
		b, err := os.ReadFile(s.keyFile)
		if err != nil {
			return nil, fmt.Errorf("--store-key-file: %w", err)
		}
		k := bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
		if len(k) < governance.MinKeyBytes {
			return nil, fmt.Errorf("--store-key-file: the key is %d bytes, want at least %d", len(k), governance.MinKeyBytes)
		}
		return k, nil
	case s.keyEnv != "":
		v, ok := os.LookupEnv(s.keyEnv)
		if !ok || len(v) < governance.MinKeyBytes {
			return nil, fmt.Errorf("--store-key-env: $%s is unset or shorter than %d bytes", s.keyEnv, governance.MinKeyBytes)
		}
		return []byte(v), nil
	}
	return nil, nil
}

// open opens the store and sets it, with its key, in gcfg.
func (s *storeFlags) open(ctx context.Context, gcfg *governance.GateConfig) (io.Closer, error) {
	key, err := s.key()
	if err != nil {
		return nil, err
	}
	db, err := store.Open(ctx, s.url)
	if err != nil {
		return nil, err
	}
	gcfg.Store, gcfg.StoreAuditKey = db, key
	return db, nil
}

// pausedMessage tells the user what to do with a paused task.
func pausedMessage(p *governance.PendingCall) string {
	what := "approval"
	if p.OutcomeUnknown {
		what = "a decision: its process ended before its result was recorded (outcome unknown)"
	}
	return fmt.Sprintf("wasmbox: task %s paused: call %d (tool %s) waits for %s.\n"+
		"  see it:     wasmbox approvals show %s\n"+
		"  decide:     wasmbox approvals approve %s %d   (or deny)\n"+
		"  then:       wasmbox resume %s   (with the same options as the run)",
		p.TaskID, p.Seq, termsafe.Clean(strconv.Quote(p.Tool)), what, p.TaskID, p.TaskID, p.Seq, p.TaskID)
}

const approvalsUsage = `usage:
  wasmbox approvals list    [--store URL] [--json]
  wasmbox approvals show    [--store URL] [--json] TASK
  wasmbox approvals approve [--store URL] [--by NAME] [--reason TEXT] TASK CALL
  wasmbox approvals deny    [--store URL] [--by NAME] [--reason TEXT] TASK CALL
  wasmbox approvals serve   [--store URL] [--http ADDR]
(the store also comes from WASMBOX_STORE; --store-key-file/--store-key-env as for run)
`

// approvalsMain implements `wasmbox approvals ...`.
func approvalsMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, approvalsUsage)
		return exitUsage
	}
	verb := args[0]
	fs := flag.NewFlagSet("wasmbox approvals "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var sf storeFlags
	sf.register(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	by := fs.String("by", "", "who decides (default: the user name); recorded as approver:cli:NAME")
	reason := fs.String("reason", "", "why (recorded in the audit chain)")
	httpAddr := fs.String("http", "127.0.0.1:8765", "serve: the address to listen on (loopback unless you put it behind your own authentication)")
	allowRemote := fs.Bool("allow-remote", false, "serve: allow a non-loopback --http address")
	if err := fs.Parse(args[1:]); err != nil {
		return parseExit(err)
	}
	usage := func(msg string) int {
		fmt.Fprintf(stderr, "wasmbox approvals %s: %s\n%s", verb, msg, approvalsUsage)
		return exitUsage
	}
	sf.resolve()
	if sf.url == "" {
		return usage("no store: give --store URL or set WASMBOX_STORE")
	}
	gcfg := governance.GateConfig{Auditor: governance.DiscardAuditor{}}
	closer, err := sf.open(ctx, &gcfg)
	if err != nil {
		fmt.Fprintln(stderr, "wasmbox approvals:", termsafe.Clean(err.Error()))
		return exitFailure
	}
	defer closer.Close()
	gate, err := governance.NewGate(gcfg)
	if err != nil {
		fmt.Fprintln(stderr, "wasmbox approvals:", err)
		return exitFailure
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "wasmbox approvals "+verb+":", termsafe.Clean(err.Error()))
		if errors.Is(err, governance.ErrTaskUnknown) || errors.Is(err, governance.ErrNotPending) || errors.Is(err, governance.ErrAlreadyDecided) {
			return exitRemapped
		}
		return exitFailure
	}
	rest := fs.Args()
	switch verb {
	case "list":
		if len(rest) != 0 {
			return usage("list takes no arguments")
		}
		var all []governance.PendingCall
		task, seq := "", int64(0)
		for {
			page, err := gate.PendingCalls(ctx, task, seq, 0)
			if err != nil {
				return fail(err)
			}
			all = append(all, page...)
			if len(page) < governance.MaxStoreScan {
				break
			}
			task, seq = page[len(page)-1].TaskID, page[len(page)-1].Seq
		}
		if *asJSON {
			if all == nil {
				all = []governance.PendingCall{}
			}
			writeJSON(stdout, all)
			return 0
		}
		if len(all) == 0 {
			fmt.Fprintln(stdout, "no calls wait for a decision")
			return 0
		}
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TASK\tCALL\tTOOL\tEFFECT\tWAITING SINCE\tWHY")
		for _, p := range all {
			why := p.Reason
			if p.OutcomeUnknown {
				why = "OUTCOME UNKNOWN: " + why
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", p.TaskID, p.Seq, termsafe.Clean(strconv.Quote(p.Tool)), p.Effect,
				p.Since.Local().Format(time.DateTime), termsafe.Clean(why))
		}
		tw.Flush()
		fmt.Fprintln(stdout, "(wasmbox approvals show TASK: the arguments in full)")
		return 0
	case "show":
		if len(rest) != 1 {
			return usage("show takes one TASK")
		}
		info, err := gate.TaskInfo(ctx, rest[0])
		if err != nil {
			return fail(err)
		}
		if *asJSON {
			rep, verr := gate.VerifyTask(ctx, info.ID)
			out := struct {
				governance.TaskInfo
				AuditRecords int    `json:"audit_records"`
				AuditHead    string `json:"audit_head"`
				AuditIntact  bool   `json:"audit_intact"`
				AuditError   string `json:"audit_error,omitempty"`
			}{TaskInfo: info, AuditRecords: rep.Records, AuditHead: rep.Head, AuditIntact: verr == nil}
			if verr != nil {
				out.AuditError = verr.Error()
			}
			writeJSON(stdout, out)
			if verr != nil {
				return exitFailure
			}
			return 0
		}
		fmt.Fprintf(stdout, "task %s: %s, %d calls (%d denied), %d runs, %s of program time\n", info.ID, info.State, info.Calls, info.Denied, info.Runs, info.Used)
		if info.Error != "" {
			fmt.Fprintf(stdout, "error: %s\n", termsafe.Clean(info.Error))
		}
		if p := info.Pending; p != nil {
			fmt.Fprintf(stdout, "waiting: call %d, tool %s (%s, cost %d), since %s\nwhy: %s\n", p.Seq, termsafe.Clean(strconv.Quote(p.Tool)), p.Effect, p.Cost,
				p.Since.Local().Format(time.DateTime), termsafe.Clean(p.Reason))
			if p.OutcomeUnknown {
				fmt.Fprintln(stdout, "OUTCOME UNKNOWN: the call was started by a process that ended before its result was recorded; approving runs it again (same idempotency key), denying fails it")
			}
			fmt.Fprintln(stdout, "arguments (complete; characters that could hide text are shown escaped):")
			var pretty bytes.Buffer
			if json.Indent(&pretty, p.Args, "  ", "  ") != nil {
				pretty.Reset()
				pretty.Write(p.Args)
			}
			fmt.Fprintf(stdout, "  %s\n", termsafe.Lines(pretty.String()))
		}
		rep, err := gate.VerifyTask(ctx, info.ID)
		if err != nil {
			fmt.Fprintf(stdout, "audit chain: NOT INTACT: %s\n", termsafe.Clean(err.Error()))
			return exitFailure
		}
		keyed := "unkeyed (give --store-key-file to make edits by the store's writers detectable)"
		if rep.Keyed {
			keyed = "HMAC-keyed"
		}
		fmt.Fprintf(stdout, "audit chain: %d records, intact, %s, head %s; the journal and the code it runs on resume agree with it\n", rep.Records, keyed, rep.Head)
		return 0
	case "approve", "deny":
		if len(rest) != 2 {
			return usage(verb + " takes TASK CALL")
		}
		seq, err := strconv.ParseInt(rest[1], 10, 64)
		if err != nil || seq < 1 {
			return usage(fmt.Sprintf("CALL %q is not a call number", rest[1]))
		}
		name := *by
		if name == "" {
			if u, err := user.Current(); err == nil {
				name = u.Username
			}
		}
		who := "approver:cli"
		if name != "" {
			who += ":" + termsafe.Clean(name)
		}
		d := governance.TaskDecision{Allow: verb == "approve", DecidedBy: who, Reason: *reason}
		if err := gate.Decide(ctx, rest[0], seq, d); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "recorded: call %d of task %s %sd by %s; resume it with: wasmbox resume %s\n", seq, rest[0], verb, who, rest[0])
		return 0
	case "serve":
		if len(rest) != 0 {
			return usage("serve takes no arguments")
		}
		return serveApprovals(ctx, gate, *httpAddr, *allowRemote, stdout, stderr)
	}
	return usage("unknown subcommand " + strconv.Quote(verb))
}
