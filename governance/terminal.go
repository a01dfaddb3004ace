package governance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wasmbox/wasmbox/internal/termsafe"
)

// TerminalApprover asks a person at a terminal: it writes the question to Out and reads a y/N answer from In.
// Only "y" or "yes" (any case) approves; anything else, an empty line, end of input or a read error denies.
//
// It never writes to standard output, which belongs to the program's results: the default Out is os.Stderr.
// Everything shown that came from the call (tool name, arguments, reason) is escaped so that code in the
// sandbox cannot smuggle terminal control sequences into the question. Arguments are shown after
// GateConfig.Redact, compacted (insignificant whitespace removed, so that padding cannot push a value out of
// sight), and never cut silently: arguments longer than MaxArgsBytes are shown up to that length with the
// number of bytes not shown, and the call is then denied without asking, because nobody can approve what they
// were not shown. (The gate refuses arguments with duplicate object keys before any approver sees them.)
//
// Questions are asked one at a time; concurrent requests wait their turn (within their own timeout). One
// goroutine reads In for the life of the approver. After a question timed out, whatever was typed since is
// discarded before the next question is asked; but a late answer that arrives just as the next question is
// printed cannot be told apart from an answer to it: keep approval timeouts long for interactive use.
//
// The zero value is ready to use. Do not copy a TerminalApprover after first use.
type TerminalApprover struct {
	In           io.Reader // nil: os.Stdin
	Out          io.Writer // nil: os.Stderr
	Name         string    // recorded as DecidedBy "approver:Name"; empty means "terminal"
	MaxArgsBytes int       // the longest arguments shown (longer ones are denied); zero means DefaultTerminalArgsBytes

	once  sync.Once
	turn  chan struct{} // a one-slot semaphore: whoever holds it asks
	lines chan lineOrErr
	inErr error // sticky end of input; guarded by turn
	stale bool  // the last question timed out; guarded by turn
}

// DefaultTerminalArgsBytes is the longest arguments a [TerminalApprover] shows when its MaxArgsBytes is zero.
const DefaultTerminalArgsBytes = 8 << 10

type lineOrErr struct {
	line string
	err  error
}

func (t *TerminalApprover) init() {
	t.once.Do(func() {
		t.turn = make(chan struct{}, 1)
		t.lines = make(chan lineOrErr, 1)
		in := t.In
		if in == nil {
			in = os.Stdin
		}
		go func() {
			r := bufio.NewReader(in)
			for {
				s, err := r.ReadString('\n')
				if s != "" && (err == nil || err == io.EOF) {
					t.lines <- lineOrErr{line: s}
				}
				if err != nil {
					if errors.Is(err, io.EOF) {
						err = io.EOF
					}
					t.lines <- lineOrErr{err: err}
					return
				}
			}
		}()
	})
}

// Approve asks the question and waits for an answer or the end of ctx.
func (t *TerminalApprover) Approve(ctx context.Context, req ApprovalRequest) (Decision, error) {
	t.init()
	select {
	case t.turn <- struct{}{}:
	case <-ctx.Done():
		return Decision{}, ctx.Err()
	}
	defer func() { <-t.turn }()

	by := "approver:terminal"
	if t.Name != "" {
		by = "approver:" + t.Name
	}
	out := t.Out
	if out == nil {
		out = os.Stderr
	}
	if t.inErr != nil {
		return Decision{}, fmt.Errorf("governance: terminal input: %w", t.inErr)
	}
	// Discard answers typed for an earlier question that timed out. (Lines typed ahead after an answered
	// question are kept, so that scripted input works.)
	for drained := !t.stale; !drained; {
		select {
		case l := <-t.lines:
			if l.err != nil {
				t.inErr = l.err
				return Decision{}, fmt.Errorf("governance: terminal input: %w", l.err)
			}
		default:
			drained = true
		}
	}
	t.stale = false
	q, hidden := t.question(req)
	if _, err := io.WriteString(out, q); err != nil {
		return Decision{}, fmt.Errorf("governance: terminal output: %w", err)
	}
	if hidden > 0 {
		return Decision{Allow: false, Reason: "arguments too long to show in full (" + strconv.Itoa(hidden) + " bytes not shown): denied without asking", DecidedBy: by}, nil
	}
	select {
	case l := <-t.lines:
		if l.err != nil {
			t.inErr = l.err
			_, _ = io.WriteString(out, "\n")
			if l.err == io.EOF {
				return Decision{Allow: false, Reason: "no answer (end of input)", DecidedBy: by}, nil
			}
			return Decision{}, fmt.Errorf("governance: terminal input: %w", l.err)
		}
		switch strings.ToLower(strings.TrimSpace(l.line)) {
		case "y", "yes":
			return Decision{Allow: true, Reason: "approved at the terminal", DecidedBy: by}, nil
		}
		return Decision{Allow: false, Reason: "denied at the terminal", DecidedBy: by}, nil
	case <-ctx.Done():
		t.stale = true
		_, _ = io.WriteString(out, "\n(no answer in time: denied)\n")
		return Decision{}, ctx.Err()
	}
}

// question returns the text to show and how many bytes of the arguments it does not show (then the call is
// denied without asking).
func (t *TerminalApprover) question(req ApprovalRequest) (string, int) {
	c := req.Call
	limit := t.MaxArgsBytes
	if limit <= 0 {
		limit = DefaultTerminalArgsBytes
	}
	var compact bytes.Buffer
	args := string(req.DisplayArgs)
	if json.Compact(&compact, req.DisplayArgs) == nil {
		args = compact.String()
	}
	if args == "" {
		args = "(none)"
	}
	hidden := 0
	if len(args) > limit {
		shown := truncateUTF8(args, limit)
		hidden = len(args) - len(shown)
		args = shown + "… [" + strconv.Itoa(hidden) + " MORE BYTES NOT SHOWN: " + strconv.Itoa(len(args)) + " bytes in all]"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nApproval needed: run %s, call %d, from %s\n", sanitize(c.RunID), c.Seq, sanitize(string(c.Source)))
	fmt.Fprintf(&b, "  tool:   %s (%s, cost %d)\n", sanitize(c.Tool), c.Effect.Resolve(), c.Cost)
	fmt.Fprintf(&b, "  why:    %s\n", sanitize(req.Reason))
	fmt.Fprintf(&b, "  args:   %s\n", sanitize(args))
	if hidden > 0 {
		fmt.Fprintf(&b, "Denied: the arguments are longer than this approver shows (%d bytes), and a call cannot be approved unseen.\n", limit)
		return b.String(), hidden
	}
	if !req.Deadline.IsZero() {
		fmt.Fprintf(&b, "  answer within %s\n", time.Until(req.Deadline).Round(time.Second))
	}
	b.WriteString("Approve? [y/N] ")
	return b.String(), 0
}

// sanitize escapes every rune that is not printable, so that text from the sandbox cannot drive the terminal.
func sanitize(s string) string { return termsafe.Clean(s) }
