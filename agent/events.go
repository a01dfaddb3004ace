package agent

import (
	"time"

	"github.com/wasmbox/wasmbox/hostfuncs"
)

// EventKind names an event of a Run.
type EventKind string

// The events of a Run, in the order they can happen within a step.
const (
	// EventModelTurn: the model replied (Text is the reply).
	EventModelTurn EventKind = "model_turn"
	// EventNudge: the reply had no code; Text is the nudge sent back.
	EventNudge EventKind = "nudge"
	// EventCode: Code is the program about to run.
	EventCode EventKind = "code"
	// EventStdout: Text is a chunk of the program's output, as it is written.
	EventStdout EventKind = "stdout"
	// EventToolCall: ToolCall is one tool call of the program with the gate's decision. Tool-call events come
	// when the program ends, in call order.
	EventToolCall EventKind = "tool_call"
	// EventObservation: Text is what goes back to the model after a program that did not answer.
	EventObservation EventKind = "observation"
	// EventRepair: the program failed and goes back for repair; Err is the failure, Text the request.
	EventRepair EventKind = "repair"
	// EventRestart: the interpreter was lost (a hard timeout, a trap) and a new one started; Err says why.
	EventRestart EventKind = "restart"
	// EventAnswer: Answer is the answer (Text says where it came from: "final_answer" or "output").
	EventAnswer EventKind = "answer"
	// EventError: the Run ended without an answer; Err is Run's error.
	EventError EventKind = "error"
)

// Event is one thing that happened in a Run, for user interfaces and logs.
type Event struct {
	Kind     EventKind
	Step     int // 1-based; 0 for events outside a step
	Time     time.Time
	RunID    string // the governance run of the Run (Result.RunID)
	Text     string
	Code     string
	ToolCall *hostfuncs.ToolCall
	Answer   any
	Err      error
}
