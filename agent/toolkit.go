package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/tools"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/wasmbox"
	"github.com/wasmbox/wasmbox/wheels"
)

// The names of the five sandbox tools.
const (
	ToolExecute        = "execute"
	ToolReadFile       = "read_file"
	ToolWriteFile      = "write_file"
	ToolListFiles      = "list_files"
	ToolInstallPackage = "install_package"
)

// Toolkit is the sandbox as five tools for tool-calling agents (langchaingo's agents, or a function-calling
// loop of your own): execute, read_file, write_file, list_files and install_package. They share one
// interpreter session and its workspace, so state persists from one execute to the next.
//
// Every call passes the Gate as a direct agent call (governance.SourceAgent) before it does anything, with
// these effects: read_file and list_files are read-only; execute, write_file and install_package are mutating.
// The tools called by executed code pass the same Gate again, each on its own. A policy that names tools must
// name these five to allow them.
//
// The direct calls and the tool calls of executed code count against one governance run (GovernanceRun): the
// session's own, or the one given with WithGovernanceRun. So the gate's limits (max_tool_calls, MaxIrreversible,
// ...) bound everything the Toolkit does, and an execute call and the tool calls of its code are one task in
// the audit log. An execute call counts as one call itself, then each tool call of its code counts too.
//
// A tool never returns a Go error: a refused call, bad arguments, a missing file or a failing program come back
// as the result text ("error: ..."), so the model sees them and the agent's loop goes on. Call is safe for
// concurrent use; calls are serialised.
type Toolkit struct {
	mu     sync.Mutex
	se     *wasmbox.Session
	ws     *wasmbox.Workspace
	reg    *hostfuncs.Registry
	bridge *hostfuncs.Bridge
	run    *governance.Run
	opts   options
	tools  []*SandboxTool
	// builtin are the runtime's built-in packages (Info.BuiltIn): what install_package answers without an
	// installer.
	builtin wheels.Provided
	defs    map[string]json.RawMessage
}

// NewToolkit starts a session of sb in ws (nil: a fresh workspace). gate must be the Gate sb was configured
// with, so that direct calls and calls from code are governed and audited together. Options used:
// WithPackageInstaller, WithMaxObservation, WithLogger, WithGovernanceRun.
func NewToolkit(ctx context.Context, sb *wasmbox.Sandbox, gate *governance.Gate, ws *wasmbox.Workspace, opts ...Option) (*Toolkit, error) {
	if sb == nil || gate == nil {
		return nil, fmt.Errorf("%w: NewToolkit needs the sandbox and the Gate it was configured with", ErrInvalidOption)
	}
	o, err := applyOptions(opts)
	if err != nil {
		return nil, err
	}
	return newToolkit(ctx, sb, gate, ws, o)
}

func newToolkit(ctx context.Context, sb *wasmbox.Sandbox, gate *governance.Gate, ws *wasmbox.Workspace, o options) (*Toolkit, error) {
	if o.escalation != nil {
		// Its install_package would point the model at run_in_container, which only the code-action agent has.
		return nil, fmt.Errorf("%w: WithEscalation is for the code-action agent (New); the Toolkit has no run_in_container", ErrInvalidOption)
	}
	if ws == nil {
		ws = wasmbox.NewWorkspace(0, 0)
	}
	se, err := sb.NewSession(ctx, ws)
	if err != nil {
		return nil, err
	}
	run := o.govRun
	if run == nil {
		run = se.GovernanceRun()
	}
	if res, err := se.ExecProgram(ctx, wasmbox.Program{Code: toolkitSetup, Governance: run}); err != nil || res.Exception != nil {
		_ = se.Close(ctx)
		if err == nil {
			err = res.Exception
		}
		return nil, fmt.Errorf("%w: setting up the session: %w", ErrSandbox, err)
	}
	k := &Toolkit{se: se, ws: ws, opts: o, run: run, reg: hostfuncs.NewRegistry(), defs: map[string]json.RawMessage{},
		builtin: wheels.Provided(sb.Info().BuiltIn)}
	for _, d := range toolDefs {
		t := hostfuncs.Tool{Name: d.name, Description: d.desc, Parameters: json.RawMessage(d.schema), Effect: d.effect,
			Handler: k.handler(d.name)}
		if err := k.reg.Register(t); err != nil {
			_ = se.Close(ctx)
			return nil, err
		}
		k.defs[d.name] = json.RawMessage(d.schema)
		k.tools = append(k.tools, &SandboxTool{k: k, name: d.name, desc: d.desc})
	}
	k.bridge = hostfuncs.NewBridge(k.reg, run, governance.SourceAgent)
	return k, nil
}

// NewToolkit returns the five sandbox tools over the agent's sandbox and Gate, with the agent's options
// (with WithGovernanceRun, the Toolkit's calls count against the same run as the agent's Runs).
func (a *Agent) NewToolkit(ctx context.Context, ws *wasmbox.Workspace) (*Toolkit, error) {
	o := a.opts
	o.escalation = nil // the agent's run_in_container is its own; the Toolkit never offers it
	return newToolkit(ctx, a.sb, a.gate, ws, o)
}

// toolkitSetup binds the sandbox's tools and their exceptions in the session's globals, as in the code-action
// agent.
const toolkitSetup = `def _wasmbox_toolkit_setup():
    import builtins, tools
    g = globals()
    g["tools"] = tools
    for n in tools.__all__:
        if n != "call" and not hasattr(builtins, n):
            g.setdefault(n, getattr(tools, n))

_wasmbox_toolkit_setup()
del _wasmbox_toolkit_setup
`

type toolDef struct {
	name, desc, schema string
	effect             governance.Effect
	raw                string // the argument a plain-string input stands for
}

var toolDefs = []toolDef{
	{ToolExecute, "Run Python code (CPython 3.13, standard library, no network) in the sandbox session and return what it printed, " +
		"any error with its traceback, and the tool calls it made. The sandbox's tools are defined as Python functions " +
		"(tools.list_tools() describes them). Variables, imports and files persist between calls; print what you need to see.",
		`{"type":"object","properties":{"code":{"type":"string","description":"the Python program to run"}},"required":["code"],"additionalProperties":false}`,
		governance.Mutating, "code"},
	{ToolReadFile, "Read a text file of the sandbox workspace (/workspace).",
		`{"type":"object","properties":{"path":{"type":"string","description":"the file's path, relative to /workspace"}},"required":["path"],"additionalProperties":false}`,
		governance.ReadOnly, "path"},
	{ToolWriteFile, "Create or replace a text file in the sandbox workspace (/workspace); parent directories are created.",
		`{"type":"object","properties":{"path":{"type":"string","description":"the file's path, relative to /workspace"},"content":{"type":"string","description":"the file's new content"}},"required":["path","content"],"additionalProperties":false}`,
		governance.Mutating, ""},
	{ToolListFiles, "List the files of the sandbox workspace (/workspace) with their sizes.",
		`{"type":"object","properties":{"path":{"type":"string","description":"a directory to list, relative to /workspace; empty for all"}},"additionalProperties":false}`,
		governance.ReadOnly, "path"},
	{ToolInstallPackage, "Install third-party Python packages into the sandbox.",
		`{"type":"object","properties":{"packages":{"type":"array","items":{"type":"string"},"minItems":1,"description":"requirement strings such as tabulate or attrs==23.2.0"}},"required":["packages"],"additionalProperties":false}`,
		governance.Mutating, "packages"},
}

// Tools returns the five tools as langchaingo tools.
func (k *Toolkit) Tools() []tools.Tool {
	out := make([]tools.Tool, len(k.tools))
	for i, t := range k.tools {
		out[i] = t
	}
	return out
}

// Tool returns one of the tools by name.
func (k *Toolkit) Tool(name string) (*SandboxTool, bool) {
	for _, t := range k.tools {
		if t.name == name {
			return t, true
		}
	}
	return nil, false
}

// Definitions returns the tools as function definitions for function-calling models
// (llms.WithTools(k.Definitions())).
func (k *Toolkit) Definitions() []llms.Tool {
	out := make([]llms.Tool, len(k.tools))
	for i, t := range k.tools {
		out[i] = t.Definition()
	}
	return out
}

// CallTool runs a tool call a function-calling model asked for and returns the message part to send back.
func (k *Toolkit) CallTool(ctx context.Context, call llms.ToolCall) llms.ToolCallResponse {
	resp := llms.ToolCallResponse{ToolCallID: call.ID}
	if call.FunctionCall == nil {
		resp.Content = "error: the tool call names no function"
		return resp
	}
	resp.Name = call.FunctionCall.Name
	if _, ok := k.Tool(call.FunctionCall.Name); !ok {
		resp.Content = fmt.Sprintf("error: UnknownTool: no tool %q; the tools are: %s", call.FunctionCall.Name, strings.Join(k.reg.Names(), ", "))
		return resp
	}
	resp.Content = k.call(ctx, call.FunctionCall.Name, call.FunctionCall.Arguments)
	return resp
}

// Calls returns the direct tool calls made so far, allowed, denied or failed (calls made by executed code
// are in the execute results).
func (k *Toolkit) Calls() []hostfuncs.ToolCall { return k.bridge.Calls() }

// GovernanceRun returns the run that every call of the Toolkit, direct or from executed code, counts against.
func (k *Toolkit) GovernanceRun() *governance.Run { return k.run }

// Session returns the toolkit's interpreter session.
func (k *Toolkit) Session() *wasmbox.Session { return k.se }

// Workspace returns the toolkit's workspace.
func (k *Toolkit) Workspace() *wasmbox.Workspace { return k.ws }

// Close ends the session.
func (k *Toolkit) Close(ctx context.Context) error { return k.se.Close(ctx) }

// SandboxTool is one of the Toolkit's tools. It implements langchaingo's tools.Tool.
type SandboxTool struct {
	k          *Toolkit
	name, desc string
}

var _ tools.Tool = (*SandboxTool)(nil)

// Name returns the tool's name.
func (t *SandboxTool) Name() string { return t.name }

// Description returns the tool's description, with its input format for text-only agents.
func (t *SandboxTool) Description() string {
	return t.desc + " Input: a JSON object matching " + string(t.k.defs[t.name]) + "."
}

// Definition returns the tool as a function definition with its JSON schema.
func (t *SandboxTool) Definition() llms.Tool {
	var params map[string]any
	_ = json.Unmarshal(t.k.defs[t.name], &params)
	return llms.Tool{Type: "function", Function: &llms.FunctionDefinition{Name: t.name, Description: t.desc, Parameters: params}}
}

// Call runs the tool. input is a JSON object of arguments; for execute, read_file, list_files and
// install_package a plain string is also accepted (the code, the path, the package names). The error is always
// nil: failures are described in the result.
func (t *SandboxTool) Call(ctx context.Context, input string) (string, error) {
	return t.k.call(ctx, t.name, input), nil
}

// call passes one call through the Gate and returns the observation text.
func (k *Toolkit) call(ctx context.Context, name, input string) string {
	args, err := k.parseArgs(name, input)
	if err != nil {
		return "error: InvalidToolArguments: " + err.Error()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	resp, isErr := k.bridge.Call(ctx, name, args)
	if isErr {
		var e struct{ Type, Message string }
		if json.Unmarshal(resp, &e) != nil {
			e.Type, e.Message = "ToolError", string(resp)
		}
		k.opts.logger.Debug("sandbox tool failed", "tool", name, "type", e.Type, "error", e.Message)
		msg := "error: " + e.Type + ": " + e.Message
		if denialTypes[e.Type] {
			msg += " (the call did not run; do not retry it)"
		}
		return msg
	}
	var text string
	if err := json.Unmarshal(resp, &text); err != nil {
		return string(resp)
	}
	return text
}

func (k *Toolkit) parseArgs(name, input string) (json.RawMessage, error) {
	trimmed := strings.TrimSpace(input)
	if strings.HasPrefix(trimmed, "{") {
		var m map[string]any
		if err := json.Unmarshal([]byte(trimmed), &m); err == nil {
			return json.RawMessage(trimmed), nil
		}
	}
	var def toolDef
	for _, d := range toolDefs {
		if d.name == name {
			def = d
		}
	}
	switch def.raw {
	case "":
		return nil, fmt.Errorf("%s needs a JSON object of arguments matching %s", name, def.schema)
	case "packages":
		pkgs := strings.FieldsFunc(input, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' })
		return json.Marshal(map[string]any{"packages": pkgs})
	case "code":
		code, ok := ExtractCode(input)
		if !ok {
			code = input
		}
		return json.Marshal(map[string]any{"code": code})
	}
	return json.Marshal(map[string]any{def.raw: trimmed})
}

// handler is the host side of each tool, run after the Gate allowed the call.
func (k *Toolkit) handler(name string) hostfuncs.Handler {
	text := func(s string) (json.RawMessage, error) { return json.Marshal(s) }
	switch name {
	case ToolExecute:
		return func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			var in struct{ Code string }
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, err
			}
			res, err := k.se.ExecProgram(ctx, wasmbox.Program{Code: in.Code, Governance: k.run})
			if res == nil {
				return nil, fmt.Errorf("the sandbox could not run the code: %w", err)
			}
			out := report(res, err, k.opts.maxObs)
			if !k.se.Alive() {
				out += "The interpreter was lost and cannot run more code in this session.\n"
			}
			return text(out)
		}
	case ToolReadFile:
		return func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			var in struct{ Path string }
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, err
			}
			p, err := workspacePath(in.Path)
			if err != nil {
				return nil, err
			}
			b, err := k.ws.ReadFile(p)
			if err != nil {
				return nil, fmt.Errorf("cannot read /workspace/%s: %s", p, fsReason(err))
			}
			if !utf8.Valid(b) {
				return text(fmt.Sprintf("/workspace/%s is a binary file of %d bytes; read it with execute instead.", p, len(b)))
			}
			return text(Truncate(string(b), k.opts.maxObs))
		}
	case ToolWriteFile:
		return func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			var in struct{ Path, Content string }
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, err
			}
			p, err := workspacePath(in.Path)
			if err != nil {
				return nil, err
			}
			if err := k.ws.WriteFile(p, []byte(in.Content)); err != nil {
				return nil, fmt.Errorf("cannot write /workspace/%s: %s", p, fsReason(err))
			}
			return text(fmt.Sprintf("wrote %d bytes to /workspace/%s", len(in.Content), p))
		}
	case ToolListFiles:
		return func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			var in struct{ Path string }
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, err
			}
			dir := ""
			if strings.Trim(in.Path, "./") != "" && in.Path != "/workspace" {
				p, err := workspacePath(in.Path)
				if err != nil {
					return nil, err
				}
				dir = p
			}
			var lines []string
			for _, f := range k.ws.Files() {
				if dir != "" && f.Path != dir && !strings.HasPrefix(f.Path, dir+"/") {
					continue
				}
				if f.IsDir() {
					lines = append(lines, "/workspace/"+f.Path+"/")
				} else {
					lines = append(lines, fmt.Sprintf("/workspace/%s (%d bytes)", f.Path, f.Size))
				}
			}
			if len(lines) == 0 {
				if dir != "" {
					return text("no files under /workspace/" + dir)
				}
				return text("the workspace is empty")
			}
			return text(Truncate(strings.Join(lines, "\n"), k.opts.maxObs))
		}
	case ToolInstallPackage:
		return func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			var in struct{ Packages []string }
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, err
			}
			if k.opts.installer == nil {
				out, err := builtinOnly(ctx, k.builtin, in.Packages)
				if err != nil {
					return nil, err
				}
				return text(out)
			}
			out, err := k.opts.installer.InstallPackages(ctx, InstallRequest{Packages: in.Packages, Workspace: k.ws, Session: k.se})
			if err != nil {
				return nil, err
			}
			return text(out)
		}
	}
	panic("agent: no handler for " + name)
}

// workspacePath turns a path the model gave into one relative to /workspace, refusing anything outside it.
func workspacePath(p string) (string, error) {
	orig := p
	p = strings.TrimSpace(p)
	if strings.HasPrefix(p, "/") {
		if p != "/workspace" && !strings.HasPrefix(p, "/workspace/") {
			return "", fmt.Errorf("%q is outside the workspace: only files under /workspace can be used", orig)
		}
		p = strings.TrimPrefix(strings.TrimPrefix(p, "/workspace"), "/")
	}
	p = path.Clean(p)
	if p == "." || p == "" {
		return "", fmt.Errorf("%q names the workspace itself, not a file", orig)
	}
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", fmt.Errorf("%q is outside the workspace: only files under /workspace can be used", orig)
	}
	return p, nil
}

// fsReason shortens a workspace error for the model.
func fsReason(err error) string {
	return strings.TrimPrefix(err.Error(), "wasmbox: workspace: ")
}
