package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/wasmbox/wasmbox/governance"
)

// auditVerifyMain implements `wasmbox audit verify [--key-file F | --key-env VAR] [--head HASH] [--count N] FILE`;
// args are the arguments after "audit", starting with the subcommand "verify" (the only one so far). It verifies
// the hash chain of a JSONL audit log (and every record's HMAC when a key is given) and, with --head and
// --count, that the log ends where an anchor kept elsewhere says it does. It returns the exit status: 0 when the
// log is intact (printing "intact: N records" and "head: HASH"), 1 when it is not (naming the first bad record,
// or the anchor that does not match, on stdout) or cannot be read to the end, 2 on usage errors, including an
// unreadable FILE or key and a keyed log verified without a key.
//
// The key is the exact contents of the key file, less one trailing newline, or the value of the environment
// variable.
func auditVerifyMain(args []string, stdout, stderr io.Writer) int {
	const usage = `usage: wasmbox audit verify [--key-file FILE | --key-env VAR] [--head HASH] [--count N] LOG

Verifies a JSONL audit log written by wasmbox: every record's hash, the chain that links
each record to the one before it, and, with a key, every record's HMAC-SHA256. Edited,
removed, inserted and reordered records are detected. Records cut from the end are
detected with --head and --count (the head and record count reported when the log was
written, kept where the log's writers cannot change them), and, with a key, in a log
written with closing checkpoints that no longer ends with one. Prints the record count
and the head (the last record's hash).

  --key-file FILE   read the HMAC key from FILE (one trailing newline is ignored)
  --key-env VAR     read the HMAC key from the environment variable VAR
  --head HASH       fail unless the last record's hash is HASH (64 hex digits)
  --count N         fail unless the log has exactly N records

Exit status: 0 intact, 1 tampered or unreadable, 2 usage error.
`
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "wasmbox audit: "+format+"\n", a...)
		return code
	}
	switch {
	case len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help"):
		fmt.Fprint(stdout, usage)
		return 0
	case len(args) == 0 || args[0] != "verify":
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return fail(2, "missing subcommand (want: verify)")
		}
		return fail(2, "unknown subcommand %q (want: verify)", args[0])
	}
	args = args[1:]
	fs := flag.NewFlagSet("wasmbox audit verify", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	keyFile := fs.String("key-file", "", "")
	keyEnv := fs.String("key-env", "", "")
	wantHead := fs.String("head", "", "")
	wantCount := fs.Int64("count", -1, "")

	// Flags may come before or after the file name; "--" ends them.
	var files []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(stdout, usage)
				return 0
			}
			fmt.Fprint(stderr, usage)
			return fail(2, "%v", err)
		}
		next := fs.Args()
		if n := len(rest) - len(next); n > 0 && rest[n-1] == "--" {
			files = append(files, next...)
			break
		}
		if len(next) == 0 {
			break
		}
		files = append(files, next[0])
		rest = next[1:]
	}
	switch {
	case len(files) != 1:
		fmt.Fprint(stderr, usage)
		return fail(2, "want exactly one log file, got %d", len(files))
	case *keyFile != "" && *keyEnv != "":
		return fail(2, "use --key-file or --key-env, not both")
	case *wantHead != "" && !isHash(*wantHead):
		return fail(2, "--head %q is not a record hash (64 lowercase hex digits)", *wantHead)
	}
	countSet := false
	fs.Visit(func(f *flag.Flag) { countSet = countSet || f.Name == "count" })
	if countSet && *wantCount < 0 {
		return fail(2, "--count %d is negative", *wantCount)
	}

	var key []byte
	switch {
	case *keyFile != "":
		b, err := os.ReadFile(*keyFile)
		if err != nil {
			return fail(2, "reading the key: %v", err)
		}
		s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if s == "" {
			return fail(2, "key file %s is empty", *keyFile)
		}
		key = []byte(s)
	case *keyEnv != "":
		v, ok := os.LookupEnv(*keyEnv)
		if !ok || v == "" {
			return fail(2, "environment variable %s is not set or empty", *keyEnv)
		}
		key = []byte(v)
	}

	f, err := os.Open(files[0])
	if err != nil {
		return fail(2, "%v", err)
	}
	defer f.Close()
	rep, err := governance.Verify(f, key)
	var bad *governance.VerifyError
	switch {
	case err == nil:
		head := rep.Head
		if head == "" {
			head = "(none: empty log)"
		}
		fmt.Fprintf(stdout, "intact: %d records\nhead: %s\n", rep.Records, head)
		var mismatch []string
		if *wantHead != "" && rep.Head != *wantHead {
			mismatch = append(mismatch, fmt.Sprintf("the head is not the expected %s", *wantHead))
		}
		if countSet && int64(rep.Records) != *wantCount {
			mismatch = append(mismatch, fmt.Sprintf("the log has %d records, not the expected %d", rep.Records, *wantCount))
		}
		if len(mismatch) > 0 {
			fmt.Fprintf(stdout, "MISMATCH: %s: records were cut from the end (or added), or this is another log\n", strings.Join(mismatch, "; "))
			return 1
		}
		return 0
	case errors.As(err, &bad):
		where := fmt.Sprintf("line %d", bad.Line)
		if bad.Seq != 0 || bad.RunID != "" {
			where += fmt.Sprintf(" (run %q, seq %d)", bad.RunID, bad.Seq)
		}
		fmt.Fprintf(stdout, "TAMPERED: first bad record at %s: %s\n%d records before it are intact\n", where, bad.Reason, rep.Records)
		return 1
	case errors.Is(err, governance.ErrKeyRequired):
		return fail(2, "the log is HMAC-keyed: pass --key-file or --key-env")
	default:
		return fail(1, "%v", err)
	}
}

func isHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
