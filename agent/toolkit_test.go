package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/tools"

	"github.com/wasmbox/wasmbox/agent"
	"github.com/wasmbox/wasmbox/agent/agenttest"
	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/wasmbox"
)

func newToolkit(t *testing.T, gate *governance.Gate, opts ...agent.Option) *agent.Toolkit {
	t.Helper()
	ctx := context.Background()
	sb, err := wasmbox.New(ctx, wasmbox.Config{Tools: newShop().registry(), Gate: gate})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(ctx) })
	k, err := agent.NewToolkit(ctx, sb, gate, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close(ctx) })
	return k
}

func call(t *testing.T, k *agent.Toolkit, name, input string) string {
	t.Helper()
	tool, ok := k.Tool(name)
	if !ok {
		t.Fatalf("no tool %s", name)
	}
	out, err := tool.Call(context.Background(), input)
	if err != nil {
		t.Fatalf("%s returned a Go error: %v", name, err)
	}
	return out
}

func TestToolkitTools(t *testing.T) {
	gate, err := wasmbox.DefaultGate()
	if err != nil {
		t.Fatal(err)
	}
	k := newToolkit(t, gate)

	var names []string
	for _, tl := range k.Tools() {
		names = append(names, tl.Name())
		if !strings.Contains(tl.Description(), `"type":"object"`) {
			t.Errorf("%s: description lacks the input schema: %s", tl.Name(), tl.Description())
		}
	}
	if strings.Join(names, ",") != "execute,read_file,write_file,list_files,install_package" {
		t.Errorf("tools %v", names)
	}
	var _ []tools.Tool = k.Tools()

	for _, tc := range []struct{ tool, input, want string }{
		{"write_file", `{"path": "data/in.txt", "content": "A-1001\nA-1003\n"}`, "wrote 14 bytes to /workspace/data/in.txt"},
		{"read_file", `{"path": "/workspace/data/in.txt"}`, "A-1001\nA-1003\n"},
		{"read_file", "data/in.txt", "A-1001\nA-1003\n"}, // a plain string is the path
		{"list_files", `{}`, "/workspace/data/\n/workspace/data/in.txt (14 bytes)"},
		{"list_files", "data", "/workspace/data/\n/workspace/data/in.txt (14 bytes)"},
		{"execute", `{"code": "ids = open('data/in.txt').read().split()\ntotal = sum(get_order(order_id=i)['amount'] for i in ids)\nprint(total)"}`,
			"Output:\n578.5\nTool calls (2):\n- get_order(order_id=\"A-1001\") -> ok\n- get_order(order_id=\"A-1003\") -> ok\n"},
		// State persists between executions; a plain string (even fenced) is the code.
		{"execute", "```python\nprint(total * 2)\n```", "Output:\n1157.0\n"},
		{"execute", `{"code": "1/0"}`, "Output: (nothing printed)\nError:\nTraceback (most recent call last):\n  File \"<string>\", line 1, in <module>\nZeroDivisionError: division by zero\n"},
		{"execute", `{"code": "issue_refund(order_id='A-1001', amount=5.0)"}`, "- issue_refund(order_id=\"A-1001\", amount=5.0) -> DENIED by approver:deny_all (auto-denied): it did not run"},
		{"install_package", `{"packages": ["tabulate"]}`, "error: ToolError: install_package is not available yet: escalation/wheelhouse not configured; only the Python standard library can be used"},
		{"install_package", "tabulate", "error: ToolError: install_package is not available yet"},
		{"read_file", `{"path": "missing.txt"}`, "error: ToolError: cannot read /workspace/missing.txt"},
		{"read_file", `{"path": "/etc/passwd"}`, "error: ToolError: \"/etc/passwd\" is outside the workspace"},
		{"read_file", `{"path": "../x"}`, "is outside the workspace"},
		{"write_file", "just text", "error: InvalidToolArguments: write_file needs a JSON object"},
		{"write_file", `{"path": "x"}`, "error: InvalidToolArguments:"},
	} {
		got := call(t, k, tc.tool, tc.input)
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s(%s):\n got %q\nwant it to contain %q", tc.tool, tc.input, got, tc.want)
		}
	}

	calls := k.Calls()
	if len(calls) != 15 || calls[0].Tool != "write_file" || calls[0].Status != "ok" {
		t.Errorf("%d direct calls recorded: %+v", len(calls), calls)
	}
	if bad := calls[len(calls)-1]; bad.Status != "failed" || bad.ErrorType != "InvalidToolArguments" {
		t.Errorf("last call %+v", bad)
	}
}

// The sandbox tools pass the same Gate as direct agent calls: a policy can refuse them.
func TestToolkitGoverned(t *testing.T) {
	var sources []governance.Source
	gate, err := governance.NewGate(governance.GateConfig{
		Policy: governance.PolicyFunc(func(ctx context.Context, c governance.Call) (governance.Verdict, error) {
			sources = append(sources, c.Source)
			if c.Tool == "write_file" {
				return governance.Verdict{Action: governance.Deny, Reason: "read-only session"}, nil
			}
			return governance.Verdict{Action: governance.Allow}, nil
		}),
		Auditor: &governance.MemoryAuditor{},
	})
	if err != nil {
		t.Fatal(err)
	}
	k := newToolkit(t, gate)
	got := call(t, k, "write_file", `{"path": "a.txt", "content": "x"}`)
	if !strings.HasPrefix(got, "error: ToolDenied: call to write_file denied: read-only session") || !strings.Contains(got, "did not run") {
		t.Errorf("write_file: %q", got)
	}
	if got := call(t, k, "list_files", ""); got != "the workspace is empty" {
		t.Errorf("list_files: %q", got)
	}
	// execute is allowed, and the tools its code calls pass the gate too, as calls from Python.
	if got := call(t, k, "execute", "print(len(list_orders()))"); !strings.HasPrefix(got, "Output:\n4\n") {
		t.Errorf("execute: %q", got)
	}
	want := []governance.Source{governance.SourceAgent, governance.SourceAgent, governance.SourceAgent, governance.SourcePython}
	if len(sources) != len(want) {
		t.Fatalf("sources %v", sources)
	}
	for i := range want {
		if sources[i] != want[i] {
			t.Errorf("sources %v, want %v", sources, want)
		}
	}
}

func TestToolkitDefinitionsAndCallTool(t *testing.T) {
	gate, _ := wasmbox.DefaultGate()
	k := newToolkit(t, gate)
	defs := k.Definitions()
	if len(defs) != 5 {
		t.Fatalf("%d definitions", len(defs))
	}
	for _, d := range defs {
		if d.Type != "function" || d.Function == nil || d.Function.Description == "" {
			t.Errorf("definition %+v", d)
			continue
		}
		b, _ := json.Marshal(d.Function.Parameters)
		var schema struct {
			Type       string         `json:"type"`
			Properties map[string]any `json:"properties"`
		}
		if err := json.Unmarshal(b, &schema); err != nil || schema.Type != "object" {
			t.Errorf("%s: parameters %s", d.Function.Name, b)
		}
	}

	// A function-calling turn: the scripted model asks for execute, the toolkit answers.
	model := agenttest.NewReplies(t, agenttest.Reply{ToolCalls: []llms.ToolCall{{ID: "c1", Type: "function",
		FunctionCall: &llms.FunctionCall{Name: "execute", Arguments: `{"code": "print(6 * 7)"}`}}}})
	resp, err := model.GenerateContent(context.Background(), []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, "6*7?")},
		llms.WithTools(defs))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(model.CallOptions()[0].Tools); got != 5 {
		t.Errorf("the model got %d tools", got)
	}
	part := k.CallTool(context.Background(), resp.Choices[0].ToolCalls[0])
	if part.ToolCallID != "c1" || part.Name != "execute" || part.Content != "Output:\n42\n" {
		t.Errorf("response %+v", part)
	}
	if part := k.CallTool(context.Background(), llms.ToolCall{ID: "c2", FunctionCall: &llms.FunctionCall{Name: "rm", Arguments: "{}"}}); !strings.Contains(part.Content, "UnknownTool") {
		t.Errorf("unknown tool: %+v", part)
	}
}

func TestToolkitInstaller(t *testing.T) {
	gate, _ := wasmbox.DefaultGate()
	var got agent.InstallRequest
	k := newToolkit(t, gate, agent.WithPackageInstaller(agent.PackageInstallerFunc(func(ctx context.Context, req agent.InstallRequest) (string, error) {
		got = req
		if req.Packages[0] == "numpy" {
			return "", errors.New("numpy has native code: escalation needed")
		}
		return "installed " + strings.Join(req.Packages, ", "), nil
	})))
	if out := call(t, k, "install_package", `{"packages": ["tabulate", "attrs==23.2.0"]}`); out != "installed tabulate, attrs==23.2.0" {
		t.Errorf("install: %q", out)
	}
	if got.Workspace != k.Workspace() {
		t.Error("the installer did not get the session's workspace")
	}
	if out := call(t, k, "install_package", "numpy"); out != "error: ToolError: numpy has native code: escalation needed" {
		t.Errorf("install numpy: %q", out)
	}
}

// With an installer, the code-action agent offers install_package to the programs, through the gate.
func TestAgentInstaller(t *testing.T) {
	var got agent.InstallRequest
	inst := agent.PackageInstallerFunc(func(ctx context.Context, req agent.InstallRequest) (string, error) {
		got = req
		return "installed " + strings.Join(req.Packages, " "), nil
	})
	model := agenttest.New(t, py("final_answer(install_package(packages=['tabulate']))"))
	a, _ := newAgent(t, model, agent.WithPackageInstaller(inst))
	if !strings.Contains(a.SystemPrompt(), "def install_package(packages: list[str]) -> str:") ||
		!strings.Contains(a.SystemPrompt(), "installed first with install_package") {
		t.Errorf("system prompt:\n%s", a.SystemPrompt())
	}
	res, err := run(t, a, "Install tabulate.")
	if err != nil || res.Answer != "installed tabulate" {
		t.Fatalf("answer %v, err %v", res.Answer, err)
	}
	if got.Workspace == nil || got.Workspace != res.Workspace {
		t.Error("the installer did not get the run's workspace")
	}

	// Without one, the prompt says there is no installation.
	a, _ = newAgent(t, agenttest.New(nil))
	if strings.Contains(a.SystemPrompt(), "install_package") || !strings.Contains(a.SystemPrompt(), "no pip") {
		t.Errorf("system prompt:\n%s", a.SystemPrompt())
	}
}
