// Package mcp connects wasmbox to the Model Context Protocol, both ways.
//
// As a client, it makes the tools of MCP servers sandbox tools: code in the sandbox calls them as Python
// functions, and every call passes the Sandbox's governance Gate (policy, approval, budgets, audit) before it
// reaches the server. As a server ([NewServer]), it gives any MCP client a sandboxed Python: run_python, a
// session form that keeps one interpreter per MCP session, and file tools for the session's workspace.
//
// Here's an example:
//
//	c, err := mcp.Connect(ctx, mcp.Server{Command: []string{"npx", "@modelcontextprotocol/server-everything"}}, mcp.Config{})
//	if err != nil { ... }
//	cfg := wasmbox.Config{Gate: gate}
//	if err := mcp.Attach(&cfg, c); err != nil { ... } // the tools, and the server's life, now belong to the Sandbox
//	sb, err := wasmbox.New(ctx, cfg)
//	defer sb.Close(ctx) // stops the server (and, on Unix, every process it started)
//	res, err := sb.Run(ctx, "import tools\nprint(tools.get_sum(a=1, b=2))")
//
// # Mapping
//
//   - Names become Python identifiers ([Identifier]: get-sum → get_sum, class → class_, 1st → t_1st); clashes
//     get _2, _3... in the order of the servers' names, so the same tools always get the same names.
//   - Input schemas become signatures and docstrings (parameters that are not identifiers are renamed in
//     Python and renamed back on the wire).
//   - Annotations are the server's claims: by default every tool is unspecified (treated as irreversible: it
//     needs approval unless a policy marks it) and the hints are told in its description. With
//     Config.TrustAnnotations they become the Effect ([EffectOf]): openWorldHint (true or absent) →
//     Irreversible, else readOnlyHint → ReadOnly, destructiveHint false → Mutating, otherwise Irreversible.
//   - Results: structuredContent as a dict or list; one text content as a str; several contents as a list;
//     images, audio and resources as a dict describing them (type, mime_type, size), their bytes stay on the host.
//   - An isError result, a protocol error, a timeout or a server that ended: ToolError in Python.
//
// # Notes
//
// An MCP server is a tool: its calls are governed, its process is not sandboxed by wasmbox. A stdio server
// runs as a child of this process with its rights and a minimal environment ([BaseEnv] plus Server.Env); an
// HTTP server is wherever its URL points. Annotations are the server's own claims: mark tools in the policy
// rather than trusting readOnlyHint from a server you do not control.
//
// A stdio server runs in a process group of its own, killed when its handshake fails or times out, when ctx
// is cancelled, when its tool list is refused, and at Close. On Linux the first stdio server makes this
// process a child subreaper (prctl PR_SET_CHILD_SUBREAPER, for the whole process): descendants of the server
// found in /proc, also those that called setsid, are killed and reaped with it. Elsewhere, and for a
// descendant orphaned before the client looked, nothing tracks a process that left the group.
//
// Everything the server chooses is bounded by [Config]: the number of tools, the size of schemas, names and
// descriptions, the size of a result, the wait for the handshake (ConnectTimeout, and ctx), the wait for one
// call (CallTimeout, and the run's deadline), the restarts
// of a server that ended. A server that ended is restarted on the next call (the call that saw it end fails);
// after MaxRestarts it is an error ([ErrServerDead]), never a hang.
//
// As a server, everything a client chooses is bounded by [ServerConfig]: sessions with state (MaxSessions, the
// idle ones making way for new ones after EvictIdleAfter), MCP sessions over HTTP (MaxMCPSessions), calls
// waiting in one session (MaxQueuedCalls) and the input bytes of all calls in progress (MaxPendingBytes): past
// them a call fails at once ([ErrBusy], [ErrTooManySessions]) or an HTTP request gets 503 before its body is
// read. Over stdio ([SandboxServer.ServeStdio]) a malformed line gets a JSON-RPC error and the session goes on;
// over HTTP ([SandboxServer.HTTPHandler]) a browser request from an origin not in AllowedOrigins gets 403.
//
// This package is separate from package wasmbox, so programs that use only the sandbox do not depend on the
// MCP SDK.
package mcp
