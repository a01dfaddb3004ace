package governance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wasmbox/wasmbox/governance"
)

func ExampleGate() {
	spec, err := governance.ParsePolicy([]byte(`
allow: [get_weather, send_email]
deny: [delete_all]
max_tool_calls: 10
tools:
  get_weather: {effect: read_only}
  send_email:  {effect: irreversible}   # needs approval
`), "yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	policy, err := governance.NewPolicy(*spec)
	if err != nil {
		fmt.Println(err)
		return
	}
	audit := &governance.MemoryAuditor{}
	gate, err := governance.NewGate(governance.GateConfig{
		Policy:   policy,
		Limits:   policy.Limits(),
		Approver: governance.DenyAll{}, // in real use: &governance.TerminalApprover{} or a ChanApprover
		Auditor:  audit,
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	run := gate.NewRun("run-1") // one per sandbox run: budgets and sequence numbers are per run
	tool := func(ctx context.Context, c governance.Call) ([]byte, error) {
		return []byte(`{"temp_c":21}`), nil
	}
	for _, name := range []string{"get_weather", "send_email", "delete_all"} {
		c := governance.Call{Tool: name, Args: json.RawMessage(`{"city":"Oslo"}`), Source: governance.SourcePython}
		out, err := run.Do(context.Background(), c, tool)
		var denied *governance.DeniedError
		switch {
		case errors.As(err, &denied):
			fmt.Printf("%s: denied by %s: %s\n", name, denied.DecidedBy, denied.Reason)
		case err != nil:
			fmt.Printf("%s: %v\n", name, err)
		default:
			fmt.Printf("%s: %s\n", name, out.Result)
		}
	}
	for _, r := range audit.RunRecords("run-1") {
		fmt.Println(r.Seq, r.Tool, r.Effect, r.Outcome, r.DecidedBy)
	}
	// Output:
	// get_weather: {"temp_c":21}
	// send_email: denied by approver:deny_all: auto-denied
	// delete_all: denied by policy: in the deny list
	// 1 get_weather read_only allowed policy
	// 1 get_weather read_only ok policy
	// 2 send_email irreversible denied approver:deny_all
	// 3 delete_all irreversible denied policy
}

func ExampleVerify() {
	var log bytes.Buffer
	key := []byte("a-key-kept-away-from-the-log")
	audit, _ := governance.NewJSONLAuditor(&log, governance.JSONLConfig{Key: key})
	gate, _ := governance.NewGate(governance.GateConfig{Policy: governance.AllowAllPolicy{}, Auditor: audit})
	run := gate.NewRun("run-1")
	for i := 0; i < 3; i++ {
		run.Do(context.Background(), governance.Call{Tool: "search", Effect: governance.ReadOnly},
			func(context.Context, governance.Call) ([]byte, error) { return []byte("ok"), nil })
	}

	rep, err := governance.Verify(bytes.NewReader(log.Bytes()), key)
	fmt.Println(rep.Records, err)

	tampered := bytes.Replace(log.Bytes(), []byte(`"tool":"search"`), []byte(`"tool":"SEARCH"`), 1)
	_, err = governance.Verify(bytes.NewReader(tampered), key)
	fmt.Println(err)
	// Output:
	// 6 <nil>
	// governance: audit log tampered: line 1 (run "run-1", seq 1): HMAC mismatch: record edited, or wrong key
}
