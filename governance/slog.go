package governance

import (
	"context"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// SlogLevelTrace is the slog level hclog's Trace maps to (slog has no trace level of its own).
const SlogLevelTrace = slog.LevelDebug - 4

// SlogLogger returns an hclog.Logger that writes to l, for every Logger field and option of this module's
// packages (GateConfig.Logger, wasmbox.Config.Logger, agent.WithLogger, escalate.DockerConfig.Logger). Levels map
// Trace → SlogLevelTrace, Debug, Info, Warn and Error to slog's; whether a level is enabled is l's handler's
// decision. Key-value arguments become slog attributes; Named adds a "logger" attribute ("a.b" when nested).
// A nil l gives a logger that discards everything.
func SlogLogger(l *slog.Logger) hclog.Logger {
	if l == nil {
		return hclog.NewNullLogger()
	}
	return &slogLogger{root: l, l: l}
}

type slogLogger struct {
	root    *slog.Logger // the caller's logger
	l       *slog.Logger // root with the name and the implied arguments
	name    string
	implied []any
}

func newSlogLogger(root *slog.Logger, name string, implied []any) *slogLogger {
	l := root
	if name != "" {
		l = l.With("logger", name)
	}
	if len(implied) > 0 {
		l = l.With(implied...)
	}
	return &slogLogger{root: root, l: l, name: name, implied: implied}
}

func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return SlogLevelTrace
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func (s *slogLogger) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off {
		return
	}
	s.l.Log(context.Background(), slogLevel(level), msg, args...)
}
func (s *slogLogger) Trace(msg string, args ...any) { s.Log(hclog.Trace, msg, args...) }
func (s *slogLogger) Debug(msg string, args ...any) { s.Log(hclog.Debug, msg, args...) }
func (s *slogLogger) Info(msg string, args ...any)  { s.Log(hclog.Info, msg, args...) }
func (s *slogLogger) Warn(msg string, args ...any)  { s.Log(hclog.Warn, msg, args...) }
func (s *slogLogger) Error(msg string, args ...any) { s.Log(hclog.Error, msg, args...) }

func (s *slogLogger) enabled(level hclog.Level) bool {
	return s.l.Enabled(context.Background(), slogLevel(level))
}
func (s *slogLogger) IsTrace() bool { return s.enabled(hclog.Trace) }
func (s *slogLogger) IsDebug() bool { return s.enabled(hclog.Debug) }
func (s *slogLogger) IsInfo() bool  { return s.enabled(hclog.Info) }
func (s *slogLogger) IsWarn() bool  { return s.enabled(hclog.Warn) }
func (s *slogLogger) IsError() bool { return s.enabled(hclog.Error) }

func (s *slogLogger) ImpliedArgs() []any { return append([]any(nil), s.implied...) }

func (s *slogLogger) With(args ...any) hclog.Logger {
	return newSlogLogger(s.root, s.name, append(s.ImpliedArgs(), args...))
}

func (s *slogLogger) Name() string { return s.name }

func (s *slogLogger) Named(name string) hclog.Logger {
	if s.name != "" {
		name = s.name + "." + name
	}
	return s.ResetNamed(name)
}

func (s *slogLogger) ResetNamed(name string) hclog.Logger {
	return newSlogLogger(s.root, name, s.ImpliedArgs())
}

// SetLevel does nothing: the slog handler decides which levels are written.
func (s *slogLogger) SetLevel(hclog.Level) {}

// GetLevel is the lowest level the handler writes.
func (s *slogLogger) GetLevel() hclog.Level {
	for _, lv := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if s.enabled(lv) {
			return lv
		}
	}
	return hclog.Off
}

func (s *slogLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(s.StandardWriter(opts), "", 0)
}

func (s *slogLogger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	level := hclog.Info
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		level = opts.ForceLevel
	}
	return writerFunc(func(p []byte) (int, error) {
		s.Log(level, strings.TrimRight(string(p), "\n"))
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
