package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/wasmbox/wasmbox/assets"
	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/mcp"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// govFlags are the governance flags of `wasmbox run`: MCP servers, the approver and the policy file.
type govFlags struct {
	mcp     []string
	approve string
	policy  string
}

func (g *govFlags) register(fs *flag.FlagSet) {
	fs.Func("mcp", "give the program the tools of an MCP server: 'CMD ARGS' (stdio) or an http(s):// URL (streamable HTTP); repeatable", func(v string) error {
		if strings.TrimSpace(v) == "" {
			return errors.New("empty server")
		}
		g.mcp = append(g.mcp, v)
		return nil
	})
	fs.StringVar(&g.approve, "approve", "deny", "calls that need approval: allow, deny or ask (on the terminal)")
	fs.StringVar(&g.policy, "policy", "", "the declarative policy FILE (JSON or YAML) that decides every tool call (default: read-only and mutating tools allowed, the rest need approval)")
}

// used reports whether any governance flag asks for a gate of its own.
func (g *govFlags) used() bool { return len(g.mcp) > 0 || g.policy != "" || g.approve != "deny" }

// gateConfig builds the gate's configuration from the flags; the caller sets the auditor.
func (g *govFlags) gateConfig(stdin io.Reader, stderr io.Writer) (governance.GateConfig, error) {
	gcfg := wasmbox.DefaultGateConfig()
	switch g.approve {
	case "allow":
		gcfg.Approver = governance.AllowAll{}
	case "deny":
		gcfg.Approver = governance.DenyAll{}
	case "ask":
		gcfg.Approver = &governance.TerminalApprover{In: stdin, Out: stderr, Name: "terminal"}
	default:
		return gcfg, fmt.Errorf("--approve: want allow, deny or ask, got %q", g.approve)
	}
	if g.policy != "" {
		spec, err := governance.LoadPolicyFile(g.policy)
		if err != nil {
			return gcfg, fmt.Errorf("--policy: %w", err)
		}
		pol, err := governance.NewPolicy(*spec)
		if err != nil {
			return gcfg, fmt.Errorf("--policy: %w", err)
		}
		gcfg.Policy, gcfg.Limits = pol, spec.Limits()
	}
	return gcfg, nil
}

// mcpServer reads a --mcp value: a URL, or a command line split like a shell would (quotes and backslashes;
// no variables, globs or operators).
func mcpServer(v string) (mcp.Server, error) {
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, "http://") || strings.HasPrefix(v, "https://") {
		return mcp.Server{URL: v}, nil
	}
	argv, err := splitCommand(v)
	if err != nil {
		return mcp.Server{}, fmt.Errorf("--mcp %q: %w", v, err)
	}
	return mcp.Server{Command: argv}, nil
}

func splitCommand(s string) ([]string, error) {
	var args []string
	var cur strings.Builder
	inArg := false
	var quote rune
	esc := false
	for _, r := range s {
		switch {
		case esc:
			cur.WriteRune(r)
			esc = false
		case r == '\\' && quote != '\'':
			esc, inArg = true, true
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inArg = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inArg {
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			}
		default:
			cur.WriteRune(r)
			inArg = true
		}
	}
	if quote != 0 || esc {
		return nil, errors.New("unterminated quote or escape")
	}
	if inArg {
		args = append(args, cur.String())
	}
	if len(args) == 0 {
		return nil, errors.New("empty command")
	}
	return args, nil
}

// connectMCP connects to every --mcp server and attaches their tools to cfg (the Sandbox then owns them).
func connectMCP(ctx context.Context, specs []string, timeout time.Duration, opts mcpClientFlags, cfg *wasmbox.Config, stderr io.Writer) error {
	var clients []*mcp.Client
	for _, v := range specs {
		srv, err := mcpServer(v)
		if err != nil {
			closeClients(clients)
			return err
		}
		srv.Env = opts.env
		c, err := mcp.Connect(ctx, srv, mcp.Config{CallTimeout: timeout, ConnectTimeout: opts.connectTimeout(timeout)})
		if err != nil {
			closeClients(clients)
			return fmt.Errorf("wasmbox: --mcp %q: %w", v, err)
		}
		clients = append(clients, c)
		for _, s := range c.Skipped() {
			fmt.Fprintf(stderr, "wasmbox: mcp server %s: tool left out: %s\n", c.Name(), s)
		}
	}
	if err := mcp.Attach(cfg, clients...); err != nil {
		closeClients(clients)
		return err
	}
	return nil
}

func closeClients(cs []*mcp.Client) {
	for _, c := range cs {
		c.Close(context.Background())
	}
}

const mcpUsage = `usage:
  wasmbox mcp [--http ADDR [--allow-remote] [--allow-origin ORIGIN]...] [--timeout D] [--memory SIZE] [--output-limit SIZE]
              [--workspace-size SIZE] [--max-sessions N] [--idle-timeout D] [--max-file-size SIZE]
              [--runtime NAME]
`

// mcpMain serves the sandbox to MCP clients: over stdio, or streamable HTTP with --http.
func mcpMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("wasmbox mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	httpAddr := fs.String("http", "", "serve streamable HTTP on ADDR (host:port; a bare :port means 127.0.0.1:port) at /mcp instead of stdio")
	allowRemote := fs.Bool("allow-remote", false, "let --http listen on an address that is not loopback (there is no authentication)")
	var origins []string
	fs.Func("allow-origin", "let browser pages of ORIGIN (scheme://host[:port]) call --http, with CORS; repeatable; any other Origin gets 403", func(v string) error {
		n, err := mcp.NormalizeOrigin(v)
		if err != nil {
			return err
		}
		origins = append(origins, n)
		return nil
	})
	timeout := fs.Duration("timeout", wasmbox.DefaultTimeout, "deadline of each run")
	memory := fs.String("memory", "256MiB", "memory limit of each interpreter")
	outputLimit := fs.String("output-limit", "1MiB", "cap on captured stdout and on stderr of each run")
	wsSize := fs.String("workspace-size", "64MiB", "quota of each session's workspace")
	maxSessions := fs.Int("max-sessions", mcp.DefaultMaxSessions, "most MCP sessions with state at a time")
	idle := fs.Duration("idle-timeout", mcp.DefaultIdleTimeout, "end a session after this long without a call")
	maxFile := fs.String("max-file-size", "1MiB", "largest file read_file returns and write_file takes")
	runtimeName := runtimeFlag(fs)
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	usage := func(msg string) int {
		fmt.Fprintf(stderr, "wasmbox mcp: %s\n%s", msg, mcpUsage)
		return exitUsage
	}
	if fs.NArg() != 0 {
		return usage("unexpected arguments: " + strings.Join(fs.Args(), " "))
	}
	if _, err := assets.LookupRuntime(*runtimeName); err != nil {
		return usage("--runtime: " + err.Error())
	}
	sizes := map[string]int64{}
	for name, v := range map[string]string{"memory": *memory, "output-limit": *outputLimit, "workspace-size": *wsSize, "max-file-size": *maxFile} {
		n, err := parseSize(v)
		if err != nil || n > 4<<30 {
			return usage(fmt.Sprintf("--%s: want a size up to 4GiB, got %q", name, v))
		}
		sizes[name] = n
	}
	if *timeout <= 0 || *idle <= 0 || *maxSessions <= 0 {
		return usage("--timeout, --idle-timeout and --max-sessions must be positive")
	}
	cfg := wasmbox.Config{Timeout: *timeout, MemoryLimit: sizes["memory"], StdoutLimit: int(sizes["output-limit"]),
		StderrLimit: int(sizes["output-limit"]), WorkspaceBytes: sizes["workspace-size"], Runtime: *runtimeName}
	if err := cacheFromEnv(&cfg); err != nil {
		return usage(err.Error())
	}
	cfg.OnCompile = compileProgress(stderr, cfg.CacheDir)
	sb, err := wasmbox.New(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, err)
		if errors.Is(err, wasmbox.ErrInvalidConfig) {
			return exitUsage
		}
		return exitFailure
	}
	defer sb.Close(context.WithoutCancel(ctx))
	srv := mcp.NewServer(sb, mcp.ServerConfig{MaxSessions: *maxSessions, IdleTimeout: *idle,
		MaxFileBytes: int(sizes["max-file-size"]), WorkspaceBytes: sizes["workspace-size"], AllowedOrigins: origins})
	defer srv.Close(context.WithoutCancel(ctx))
	if *httpAddr == "" {
		if err := srv.ServeStdio(ctx, stdin, stdout); err != nil && ctx.Err() == nil {
			fmt.Fprintln(stderr, "wasmbox mcp:", err)
			return exitFailure
		}
		return 0
	}
	ln, err := listenHTTP(*httpAddr, *allowRemote)
	var nl errNotLoopback
	if errors.As(err, &nl) {
		return usage(fmt.Sprintf("--http %s is not a loopback address; the server has no authentication (add --allow-remote if you mean it)", *httpAddr))
	}
	if err != nil {
		if strings.HasPrefix(err.Error(), "--http: ") {
			return usage(err.Error())
		}
		fmt.Fprintln(stderr, "wasmbox mcp:", err)
		return exitFailure
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.HTTPHandler())
	fmt.Fprintf(stderr, "wasmbox mcp: serving streamable HTTP on http://%s/mcp\n", ln.Addr())
	if err := serveHTTP(ctx, ln, mux, &http.Server{}); err != nil {
		fmt.Fprintln(stderr, "wasmbox mcp:", err)
		return exitFailure
	}
	return 0
}
