package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func refund(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errb, func(string) string { return "" })
	return code, out.String(), errb.String()
}

func TestApprovedAtTheTerminal(t *testing.T) {
	code, out, errb := refund(t, "y\n")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errb)
	}
	want := `{"amount":50,"order_id":"A-1003","refunded":true}` + "\nrefunds issued: 1\n  A-1003 50.00\n"
	if out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	for _, s := range []string{"using a SCRIPTED model", "Approval needed", "tool:   issue_refund (irreversible", "Approve? [y/N]", "tool issue_refund: ok (approver:terminal)"} {
		if !strings.Contains(errb, s) {
			t.Errorf("stderr lacks %q:\n%s", s, errb)
		}
	}
}

func TestDeniedAtTheTerminal(t *testing.T) {
	for _, stdin := range []string{"n\n", "", "maybe\n"} {
		code, out, errb := refund(t, stdin, "-order", "A-1001", "-amount", "20")
		if code != 0 {
			t.Fatalf("%q: exit %d\n%s", stdin, code, errb)
		}
		if !strings.HasPrefix(out, `{"order_id":"A-1001","reason":"call to issue_refund denied: `) ||
			!strings.Contains(out, `"refunded":false}`) || !strings.HasSuffix(out, "refunds issued: 0\n") {
			t.Errorf("%q: stdout %q", stdin, out)
		}
		if !strings.Contains(errb, "tool issue_refund: denied (approver:terminal)") {
			t.Errorf("%q: stderr:\n%s", stdin, errb)
		}
	}
}
