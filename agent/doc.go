// Package agent is the code-action agent of wasmbox, over any langchaingo llms.Model, and the sandbox as five
// langchaingo tools for tool-calling agents.
//
// The code-action agent shows the model the tools as Python stubs with their docstrings and the rules of the
// sandbox. The model answers a task by writing a Python program; the agent extracts it from the reply (fenced or
// not), runs it in a wasmbox Session (so steps share variables and files), and sends back what it printed, its
// traceback and its tool calls. A failing program goes back for a bounded number of repairs; a refused tool call
// is an observation the model can work around, never an abort. The answer is the value the program passes to
// final_answer(value), any JSON-serialisable value; when the steps run out, what the last program printed is the
// fallback.
//
// Here's an example:
//
//	model, _ := openai.New() // any llms.Model
//	a, err := agent.New(ctx, model, wasmbox.Config{Tools: registry, Gate: gate})
//	if err != nil { ... }
//	defer a.Close(ctx)
//	res, err := a.Run(ctx, "What is the total amount of every EU order?")
//	// res.Answer == 1218.5 (a float64), res.Steps holds every program and observation
//
// For tool-calling agents, [Agent.NewToolkit] (or [NewToolkit]) gives execute, read_file, write_file,
// list_files and install_package as langchaingo tools.Tool values, with JSON schemas as llms.Tool definitions.
//
// # Notes
//
//   - final_answer raises FinalAnswer, which derives from SystemExit with code 0, so `except Exception` in the
//     model's code does not swallow it and the program ends as a success; and it delivers the value before raising (as JSON in a private file of the
//     workspace, checked against a per-run nonce), so even a bare `except:` cannot lose it, and printing
//     something that looks like an answer cannot forge one.
//   - Each failure is sent back with its traceback and the tool calls that already ran (so the repair does not
//     repeat side effects); the last repair, or the same error twice, adds a nudge to try a different approach.
//     Long output is cut to its head and tail around an explicit "[... truncated, was N chars ...]" marker.
//   - Limits, all on by default: WithMaxSteps (model turns, 10), WithMaxRepairs (consecutive failed programs,
//     2), WithMaxNoCode (replies in a row without code, 2: one nudge), WithMaxRepeats (programs in a row that
//     repeat an earlier one, 2), WithTimeout (the whole Run, approval waits included, 5 minutes), on top of the
//     sandbox's per-program limits. Result.Stop says which one ended a Run.
//   - Every tool call passes the Gate of the sandbox's Config: from Python as governance.SourcePython, from the
//     Toolkit as governance.SourceAgent. All the calls of one Run (or of one Toolkit) count against one
//     governance run, so the gate's limits hold for the whole task: max_tool_calls (50 unless the gate says
//     otherwise) bounds the tool calls of a Run, and when it is reached the model gets one last step to answer.
//     WithGovernanceRun spans several Runs with one run.
//   - Events (model turns, code, stdout chunks, tool calls with their decisions, repairs, the answer) go to
//     WithEventHandler and WithLogger (an hclog.Logger; nothing is logged by default).
//   - The agenttest package has a strict scripted model for tests.
//   - Tools of MCP servers: mcp.Attach(&cfg, client) adds them to the Config given to New, governed like any
//     tool; the agent's Close then stops the servers (package mcp, kept out of this one's dependencies).
//   - Traces: a span per Run ("wasmbox.agent.run": run id, steps, stop reason, repairs, tool calls) and under
//     it one per step ("wasmbox.agent.step": step number, the program's exit code and exception type, its tool
//     calls, answered, repair); each step's Session Exec span and the spans of its tool calls nest under the
//     step. They come from the Config's TracerProvider (nil: the global one), like the sandbox's.
//
// # Errors
//
// Run returns a *Result with every error, holding the steps so far. Errors wrap the sentinels of errors.go:
// ErrRepairsExhausted, ErrMaxSteps, ErrNoProgress, ErrToolBudget, ErrDeadline (with the context's error),
// ErrModel, ErrSandbox.
package agent
