package escalate

import (
	"context"
	"encoding/json"
)

// BridgeTools adapts a function that answers a tool call with a JSON result or, when isError is set, an error
// response {"type": ..., "message": ...} naming the Python exception — the shape of hostfuncs' (*Bridge).Call —
// to a ToolHandler. An escalated run's calls then pass the same registry, argument validation, governance Gate
// and audit log as the wasm sandbox's:
//
//	bridge := hostfuncs.NewBridge(registry, gate.NewRun(runID), governance.SourceContainer)
//	job.Tools = escalate.BridgeTools(bridge.Call)
func BridgeTools(call func(ctx context.Context, tool string, args json.RawMessage) (resp []byte, isError bool)) ToolHandler {
	return func(ctx context.Context, tool string, args json.RawMessage) (json.RawMessage, error) {
		resp, isError := call(ctx, tool, args)
		if !isError {
			return resp, nil
		}
		var e struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(resp, &e); err != nil || e.Type == "" {
			return nil, &ToolError{Type: "ToolError", Message: string(resp)}
		}
		return nil, &ToolError{Type: e.Type, Message: e.Message}
	}
}
