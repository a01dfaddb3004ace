// Package escalate runs the Python work that the wasm sandbox cannot (native packages such as numpy or pandas)
// in a hardened container, only where policy allows.
//
// Here's an example:
//
//	backend, err := escalate.NewDocker(ctx, escalate.DockerConfig{Runtime: "runsc"}) // ErrNoEngine, ...
//	backend = escalate.WithPolicy(backend, escalate.AllowImages("wasmbox-python:3.11"))
//	res, err := backend.Run(ctx, escalate.Job{
//		Image: "wasmbox-python:3.11", // must be present locally: never pulled
//		Code:  "import pandas, wasmbox_tools as tools\n...",
//		Files: map[string][]byte{"data.csv": csv},
//		// every call goes through the registry and the governance Gate, and is audited
//		Tools: escalate.BridgeTools(hostfuncs.NewBridge(registry, gate.NewRun(runID), governance.SourceContainer).Call),
//	})
//	// res.Stdout, res.ExitCode, res.OOMKilled, res.Files (changed files), res.Changes
//
// # The container
//
// Every run gets a fresh container, removed afterwards on every path (a cancelled context and a deadline
// included: cleanup runs on a context detached from the caller's). Hardened by default, with nothing to turn off:
// read-only root file system, all capabilities dropped, no-new-privileges, the engine's default seccomp profile,
// no network (only lo), uid/gid 65534, memory (no swap), pids and CPU limits, a size-limited tmpfs at /workspace
// (the working directory) and at /tmp, and a deadline that kills the container. Its output is demultiplexed and
// capped (no engine-side log is kept: the log driver is "none").
//
// NewDocker fails closed: no reachable engine gives ErrNoEngine, an engine that shares no API version with
// the client ErrEngineVersion (the version is negotiated, never pinned), a missing runtime ErrRuntimeNotFound, and
// an engine that cannot enforce the limits or seccomp ErrUnenforceable — including runsc registered without
// --oci-seccomp, under which Docker's seccomp profile would not apply inside gVisor. Nothing ever runs on the host
// instead.
//
// # Runtimes
//
// DockerConfig.Runtime selects the OCI runtime: runc (default; the kernel is shared with the host) or runsc
// (gVisor: a user-space kernel, a stronger boundary, about twice the start-up time). runsc must be registered
// with the engine with --oci-seccomp and, for tools, --host-uds=open (see .ci/escalation.sh's daemon.json). Under
// runsc the sandbox's own threads count against Limits.Pids and going over kills the sandbox.
//
// # The run directory, the workspace and tools
//
// Docker's archive API cannot reach a tmpfs (files copied in before the start are hidden by the mount, and the
// tmpfs is gone after the exit) and a read-only root file system refuses it anyway, while a bind-mounted
// writable host directory would have no size limit. So each run gets a host directory (in DockerConfig.TempDir,
// mode 0700) bind-mounted read-only at /run/wasmbox, holding: the input files as a tar, the program, a small
// Python bootstrap, the tool client wasmbox_tools.py (on PYTHONPATH) and a unix socket, tools.sock. The
// bootstrap is the container's first process: it unpacks the input into /workspace, runs the program, then sends
// back over the socket the files that differ from the input and the ones deleted. The host re-checks all of it
// (paths, sizes, Limits.FilesOutBytes, and content against the input). Runs whose image has no Python use
// Job.Direct: no bootstrap, no files in or out.
//
// The same socket carries tool calls: import wasmbox_tools as tools; tools.call("name", **kwargs) (or
// tools.name(**kwargs)) sends one line of JSON, Job.Tools answers it, and an error raises the exception classes
// of the wasm sandbox's tools module (ToolException; ToolDenied with ApprovalDenied, ApprovalTimeout,
// BudgetExceeded, ToolLimitExceeded; ToolError with InvalidToolArguments, UnknownTool). BridgeTools plugs
// hostfuncs' Bridge in, so an escalated run's calls pass the same registry, Gate and audit. The network stays
// off: the socket is the container's only way out, and the host's Gate decides every call. Because the socket
// and the run directory are bind mounts, the engine must run on the same machine as this process.
//
// # Bounds of the tool socket
//
// Everything on the socket comes from inside the container, so every size, count and wait it chooses has a
// host-side bound:
//
//	request line      4 MiB                                   ProtocolError answer, connection closed
//	tool result       16 MiB                                  ToolError answer
//	connections       16 at a time per run                    LimitExceeded answer, connection closed
//	idle connection   60 s without a request                  closed without an answer (the client reconnects)
//	one request line  10 s from its first byte                ProtocolError answer, connection closed
//	one response      10 s for the peer to take it            connection closed
//	workspace path    4096 bytes, 256 levels, 255-byte names  ProtocolError answer
//	changed files     Limits.FilesOutCount (10,000 entries)   transfer cut off
//	changed bytes     Limits.FilesOutBytes, paths included    transfer cut off
//	transfer ops      2/file of FilesOutCount + 1/input file  job ended (ErrSocketLimit)
//	                    + 1/64 KiB of FilesOutBytes + 16
//
// A transfer cut off answers LimitExceeded to the container, keeps nothing more, and sets
// Result.FilesTruncated. Past the op budget (only a flood gets there) the job is ended: the container is
// killed and Run returns the partial Result with an error matching ErrSocketLimit. Deletions of paths that were
// not input files are acknowledged and not kept. The host keeps at most FilesOutBytes of paths and data per run,
// plus, while requests are being read, a 64 KiB buffer and one request line per connection.
//
// # Policy
//
// A Backend runs what it is asked. Whether a job may escalate is the caller's decision: Allowed(ctx, policy, job)
// denies by default (a nil policy allows nothing), and WithPolicy wraps a Backend so that every Run asks first.
//
// # Errors
//
// All errors start with "escalate: " and wrap a sentinel (ErrNoEngine, ErrEngineVersion, ErrImageNotFound,
// ErrRuntimeNotFound, ErrUnenforceable, ErrInvalidJob, ErrNotAllowed, ErrEngine, ErrClosed, ErrSocketLimit) and
// the engine's error. A program that ran and exited gives a Result and no error, whatever its exit code; Result.Err turns a
// non-zero exit into an *ExitError matching ErrExit, and ErrOOM for an OOM kill. A deadline returns the partial
// Result (output so far, TimedOut set) and an error matching context.DeadlineExceeded; a cancelled context one
// matching context.Canceled.
//
// # Testing
//
// .ci/escalation.sh starts private engines (Docker 20.10 and 26.1, API 1.41 and 1.45, runc and runsc) and imports
// a test image without a registry; the tests use them through WASMBOX_DOCKER_HOSTS, skip without them, and fail
// without them when CI=true. Fake Engine API servers cover what cannot run here (refused API versions, missing
// images, engines that cannot enforce the hardening).
package escalate
