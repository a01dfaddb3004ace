package cli

import (
	"errors"
	"flag"
	"strings"
	"time"
)

// mcpClientFlags are the options of `wasmbox run` for its --mcp servers.
type mcpClientFlags struct {
	env     []string      // --mcp-env: NAME (passed from this environment) or NAME=VALUE
	connect time.Duration // --mcp-connect-timeout; zero: --timeout
}

func (m *mcpClientFlags) register(fs *flag.FlagSet) {
	fs.Func("mcp-env", "pass NAME (from this environment) or set NAME=VALUE for every stdio --mcp server; repeatable (a server gets only PATH, HOME, TMPDIR, the locale and npm's cache settings otherwise)", func(v string) error {
		name, _, _ := strings.Cut(v, "=")
		if name == "" || strings.ContainsAny(name, "\x00") {
			return errors.New("want NAME or NAME=VALUE")
		}
		m.env = append(m.env, v)
		return nil
	})
	fs.DurationVar(&m.connect, "mcp-connect-timeout", 0, "the longest wait for an --mcp server to start, answer initialize and list its tools (default: --timeout)")
}

// connectTimeout bounds each server's connect: the flag, or the run's --timeout.
func (m mcpClientFlags) connectTimeout(timeout time.Duration) time.Duration {
	if m.connect > 0 {
		return m.connect
	}
	return timeout
}
