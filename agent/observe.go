package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// Truncate shortens s to about max characters (runes), keeping its head (two thirds) and its tail around an
// explicit marker that says how long s was, so that the model knows it is not seeing everything. Cuts prefer
// line boundaries near the limit. s is returned unchanged when it fits.
func Truncate(s string, max int) string {
	n := utf8.RuneCountInString(s)
	if n <= max || max <= 0 {
		return s
	}
	r := []rune(s)
	head, tail := max*2/3, max-max*2/3
	h := string(r[:head])
	if i := strings.LastIndexByte(h, '\n'); i >= len(h)*3/4 {
		h = h[:i+1]
	}
	t := string(r[n-tail:])
	if i := strings.IndexByte(t, '\n'); i >= 0 && i <= len(t)/4 {
		t = t[i+1:]
	}
	omitted := n - utf8.RuneCountInString(h) - utf8.RuneCountInString(t)
	return fmt.Sprintf("%s\n[... truncated, was %d chars: %d chars in the middle are not shown ...]\n%s", strings.TrimRight(h, "\n"), n, omitted, t)
}

// denialTypes are the Python exceptions of a refused tool call: the call did not run.
var denialTypes = map[string]bool{"ToolDenied": true, "ApprovalDenied": true, "ApprovalTimeout": true,
	"BudgetExceeded": true, "ToolLimitExceeded": true}

func isDenial(e *wasmbox.PythonError) bool { return e != nil && denialTypes[e.Type] }

// formatCall renders a tool call as name(k=v, ...) with its outcome.
func formatCall(c hostfuncs.ToolCall) string {
	var b strings.Builder
	b.WriteString(c.Tool)
	b.WriteString("(")
	b.WriteString(Truncate(formatArgs(c.Args), 300))
	b.WriteString(") -> ")
	switch c.Status {
	case "ok":
		b.WriteString("ok")
	case "denied":
		fmt.Fprintf(&b, "DENIED by %s", orString(c.DecidedBy, "the gate"))
		if c.Reason != "" {
			fmt.Fprintf(&b, " (%s)", c.Reason)
		}
		b.WriteString(": it did not run")
	default:
		fmt.Fprintf(&b, "FAILED: %s", orString(c.ErrorType, "ToolError"))
		if c.Error != "" {
			b.WriteString(": " + Truncate(c.Error, 300))
		}
	}
	return b.String()
}

// formatArgs renders a JSON object as Python keyword arguments, keys in their order.
func formatArgs(args json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(args))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return string(args)
	}
	var parts []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return string(args)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return string(args)
		}
		val := string(v)
		switch val {
		case "true":
			val = "True"
		case "false":
			val = "False"
		case "null":
			val = "None"
		}
		parts = append(parts, fmt.Sprintf("%v=%s", tok, val))
	}
	return strings.Join(parts, ", ")
}

func orString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// formatCalls lists tool calls, at most 30 lines.
func formatCalls(calls []hostfuncs.ToolCall) string {
	if len(calls) == 0 {
		return ""
	}
	lines := make([]string, 0, len(calls))
	for _, c := range calls {
		lines = append(lines, "- "+formatCall(c))
	}
	if len(lines) > 30 {
		n := len(lines)
		lines = append(append(lines[:20:20], fmt.Sprintf("- [... %d more calls not shown ...]", n-25)), lines[n-5:]...)
	}
	return fmt.Sprintf("Tool calls (%d):\n%s\n", len(calls), strings.Join(lines, "\n"))
}

// report renders what a program did: output, errors and tool calls. It is the body of every observation and
// of the execute tool's result.
func report(res *wasmbox.Result, runErr error, maxObs int) string {
	var b strings.Builder
	if res == nil {
		fmt.Fprintf(&b, "The program could not run: %v\n", runErr)
		return b.String()
	}
	if out := res.Stdout; strings.TrimSpace(out) != "" {
		fmt.Fprintf(&b, "Output:\n%s\n", strings.TrimRight(Truncate(out, maxObs), "\n"))
	} else {
		b.WriteString("Output: (nothing printed)\n")
	}
	stderr := res.Stderr
	if e := res.Exception; e != nil && e.Traceback != "" {
		stderr = strings.TrimSuffix(stderr, e.Traceback)
	}
	if strings.TrimSpace(stderr) != "" {
		fmt.Fprintf(&b, "Stderr:\n%s\n", strings.TrimRight(Truncate(stderr, maxObs/2), "\n"))
	}
	if e := res.Exception; e != nil {
		tb := hideToolFrames(e.Traceback)
		if tb == "" {
			tb = e.Type + ": " + e.Message
		}
		fmt.Fprintf(&b, "Error:\n%s\n", strings.TrimRight(Truncate(tb, maxObs/2), "\n"))
	}
	switch {
	case errors.Is(runErr, wasmbox.ErrTimeout):
		b.WriteString("The program was stopped: it ran past its time limit.\n")
	case errors.Is(runErr, wasmbox.ErrMemoryLimit) && (res.Exception == nil || res.Exception.Type != "MemoryError"):
		b.WriteString("The program was stopped: it ran out of memory.\n")
	case runErr != nil && res.Exception == nil:
		fmt.Fprintf(&b, "The program was stopped: %v\n", runErr)
	}
	b.WriteString(formatCalls(res.ToolCalls))
	return b.String()
}

// hideToolFrames drops the frames of the generated tools module from a traceback: they are the same for every
// call and have no source to show.
func hideToolFrames(tb string) string {
	if !strings.Contains(tb, `File "<wasmbox:tools>"`) {
		return tb
	}
	lines := strings.Split(tb, "\n")
	out := lines[:0]
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), `File "<wasmbox:tools>"`) {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}
