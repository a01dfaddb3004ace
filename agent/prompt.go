package agent

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/wheels"
)

// promptData fills systemPromptTemplate.
type promptData struct {
	Stubs        string
	HasTools     bool
	Approval     []string // tools shown whose every call needs a person's approval
	Install      bool
	Packages     []string // third-party packages installed in the sandbox (Config.Packages)
	BuiltIn      []string // packages built into the runtime ("numpy 2.2.4"), in name order
	Timeout      string
	Memory       string
	Instructions string
}

// systemPromptTemplate is the code-action system prompt. It follows what made code agents work in public
// systems: real tools shown as Python stubs with docstrings (and no made-up tools in examples), keyword arguments,
// an explicit final_answer that cannot be swallowed, print for inspection only, and the sandbox's limits.
var systemPromptTemplate = template.Must(template.New("system").Funcs(template.FuncMap{"join": strings.Join}).Parse(`You solve tasks by writing Python programs. Each program runs in a sandbox: CPython 3.13 with the standard library{{if .BuiltIn}}, {{join .BuiltIn ", "}}{{end}}{{if .Packages}} and a few third-party packages{{end}}, inside WebAssembly, isolated from the computer it runs on.

## How to reply
- Reply with one Python program in a single ` + "```python" + ` block. Short reasoning before the block is fine; text outside the block is not run.
- The program runs as soon as you reply. You then see what it printed, any error with its traceback, and every tool call it made; then you reply with the next program.
- State persists between your programs for this task: variables, functions and imports stay defined (unless you are told the interpreter was restarted), and so do files under /workspace.
- When you have the answer, call final_answer(value). value can be any JSON-serialisable value: str, int, float, bool, None, list, or dict with str keys (use a dict for structured answers). final_answer ends the program immediately; never call it inside try/except.
- print() is for looking at intermediate results: printed output is shown to you, not to the user, and long output is truncated. Print only what you need to see. Only final_answer delivers the answer.
- If the task cannot be done (a tool call was refused, the data does not exist), call final_answer with a short explanation of what happened instead of guessing.

For example (no tools involved):
` + "```python" + `
values = [3, 4, 5]
print(len(values))              # you will see: 3
final_answer({"total": sum(values), "count": len(values)})
` + "```" + `
{{if .HasTools}}
## Tools
These Python functions are already defined; call them directly (they are also available as tools.NAME after ` + "`import tools`" + `). Always pass arguments by keyword, as in name(arg=value). Results are ordinary Python values (dicts, lists, numbers, strings), already decoded: do not json.loads them. These are the only tools: do not invent others, and do not use their names for your own variables.

` + "```python" + `
{{.Stubs}}` + "```" + `
{{- if .Approval}}

Every call of {{join .Approval ", "}} waits for a person to approve it before it runs. If they refuse, or do not answer in time, the call raises tools.ApprovalDenied or tools.ApprovalTimeout and did not run; do not retry it.
{{- end}}

Every tool call is checked by the host's policy before it runs. Failures raise exceptions of the tools module, all subclasses of tools.ToolException:
- tools.ToolDenied (and its subclasses ApprovalDenied, ApprovalTimeout, BudgetExceeded, ToolLimitExceeded): the host refused the call and it did not run. Do not retry the same call: work around it, or report it with final_answer.
- tools.ToolError (and InvalidToolArguments, UnknownTool): the call was malformed, or the tool ran and failed; the message says why.
Catch them by name when you expect them, e.g. ` + "`except tools.ToolDenied as e:`" + `. Calls reported as ok have taken effect: do not repeat them.
{{else}}
## Tools
No tools are available: use Python and its standard library only.
{{end}}
## The sandbox
{{- if .BuiltIn}}
- Built in, ready to import (never install them): {{join .BuiltIn ", "}}.
{{- end}}
{{- if .Packages}}
- Installed third-party packages (with their dependencies), ready to import: {{join .Packages ", "}}. {{if .Install}}Other packages must be installed first with install_package(packages=[...]); pip and subprocesses do not work.{{else}}No other third-party packages, and no pip or package installation: import only the standard library and these.{{end}}
{{- else if .BuiltIn}}
- {{if .Install}}Other third-party packages must be installed first with install_package(packages=[...]); pip and subprocesses do not work.{{else}}No other third-party packages, and no pip or package installation: import only the standard library and these.{{end}}
{{- else}}
- Python standard library only: {{if .Install}}third-party packages must be installed first with install_package(packages=[...]); pip and subprocesses do not work.{{else}}no third-party packages, and no pip or package installation. Do not import modules that are not in the standard library.{{end}}
{{- end}}
- No network: sockets, HTTP and DNS do not work. No subprocesses, threads or signals.
- Files: /workspace is the working directory (read-write, kept between programs); /tmp is scratch space. There are no other files.
- Each program may run for at most {{.Timeout}} and use at most {{.Memory}} of memory.
{{- if .Instructions}}

## Instructions
{{.Instructions}}
{{- end}}
`))

// promptTools returns the tools to show the model (without those the gate always refuses), the names of those
// that always need approval, and whether install_package is shown.
func promptTools(reg *hostfuncs.Registry, view gateView) (shown *hostfuncs.Registry, approval []string, install bool, err error) {
	shown = hostfuncs.NewRegistry()
	for _, t := range reg.Tools() {
		switch view.access(t) {
		case accessNever:
			continue
		case accessApproval:
			approval = append(approval, t.Name)
		}
		if err := shown.Register(t); err != nil {
			return nil, nil, false, err
		}
		install = install || t.Name == ToolInstallPackage
	}
	return shown, approval, install, nil
}

// packageNames returns the requirements of Config.Packages as the prompt shows them: one per package, without
// blanks.
// packageNames names what the sandbox really installed (dependencies included) as "name version".
func packageNames(installed []wheels.Installed) []string {
	var out []string
	for _, w := range installed {
		if !w.BuiltIn { // shown with the runtime's built-in packages
			out = append(out, w.Name+" "+w.Version)
		}
	}
	return out
}

// builtinNames lists the runtime's built-in packages as "name version", in name order.
func builtinNames(builtin map[string]string) []string {
	out := make([]string, 0, len(builtin))
	for n, v := range builtin {
		out = append(out, n+" "+v)
	}
	slices.Sort(out)
	return out
}

func renderSystemPrompt(d promptData) string {
	var b strings.Builder
	if err := systemPromptTemplate.Execute(&b, d); err != nil {
		panic(err) // a fixed template over plain data
	}
	return b.String()
}

func humanDuration(d time.Duration) string {
	switch {
	case d%time.Minute == 0:
		return fmt.Sprintf("%d minute%s", d/time.Minute, plural(int(d/time.Minute)))
	case d%time.Second == 0:
		return fmt.Sprintf("%d second%s", d/time.Second, plural(int(d/time.Second)))
	}
	return d.String()
}

func humanBytes(n int64) string {
	switch {
	case n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// privateDir holds, relative to /workspace, the programs of a Run (so that tracebacks show their lines) and the
// answer file; the agent removes it when the Run ends.
const privateDir = ".wasmbox-agent"

// answerFile is where final_answer writes, relative to /workspace. It holds {"nonce": ..., "value": ...}: the
// host accepts it only with the run's nonce, which lives in final_answer's closure and nowhere in the program's
// globals, so ordinary code (prints, file writes without reading the closure) cannot forge an answer.
const answerFile = privateDir + "/answer.json"

// setupCode defines final_answer and FinalAnswer in the session's globals and binds the tools there. FinalAnswer
// derives from SystemExit with code 0, so `except Exception` in the model's code does not swallow it and the
// program ends as a success (exit code 0, no exception: its wasmbox.exec span says "ok"); the answer is written
// to answerFile before the raise, so even a bare `except:` cannot lose it.
const setupCode = `def _wasmbox_agent_setup(nonce, path, names):
    import builtins, json, os, tools

    class FinalAnswer(SystemExit):
        """Raised by final_answer() to end the program. Do not catch it."""

        def __init__(self):
            super().__init__(0)  # the program ends with exit code 0, as after sys.exit(0)

        def __str__(self):
            return "final answer given"

    def final_answer(value):
        """Give the answer to the task and end the program.

        value: any JSON-serialisable value (str, int, float, bool, None, list, or dict with str keys).
        """
        try:
            data = json.dumps({"nonce": nonce, "value": value}, allow_nan=False, ensure_ascii=False)
        except (TypeError, ValueError) as e:
            raise TypeError("final_answer(value): value must be JSON-serialisable (str, int, float, bool, None, "
                            "list, or dict with str keys), not %s: %s" % (type(value).__name__, e)) from None
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(data)
        raise FinalAnswer()

    g = globals()
    g["final_answer"] = final_answer
    g["FinalAnswer"] = FinalAnswer
    g["tools"] = tools
    for n in names:
        if hasattr(tools, n) and not hasattr(builtins, n):
            g[n] = getattr(tools, n)
    for n in ("ToolException", "ToolDenied", "ApprovalDenied", "ApprovalTimeout", "BudgetExceeded",
              "ToolLimitExceeded", "ToolError", "InvalidToolArguments", "UnknownTool"):
        g.setdefault(n, getattr(tools, n))

_wasmbox_agent_setup(@NONCE@, @PATH@, @NAMES@)
del _wasmbox_agent_setup
`

func renderSetup(nonce string, tools []string) string {
	q := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	if tools == nil {
		tools = []string{}
	}
	return strings.NewReplacer("@NONCE@", q(nonce), "@PATH@", q("/workspace/"+answerFile), "@NAMES@", q(tools)).Replace(setupCode)
}

func newNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
