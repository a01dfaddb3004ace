package escalate

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Backend runs jobs in containers. Implementations run what they are asked, hardened; whether a job may
// escalate at all is the caller's decision (see Policy, Allowed and WithPolicy).
type Backend interface {
	// Run runs one job to completion in a fresh container and removes the container on every path. A program
	// that ran and exited (whatever its exit code, OOM included) gives a Result and a nil error; see
	// Result.Err. A deadline gives the partial Result and an error satisfying
	// errors.Is(err, context.DeadlineExceeded).
	Run(ctx context.Context, job Job) (*Result, error)
	// Name describes the backend, e.g. "docker/runc" or "docker/runsc".
	Name() string
	// Close releases the backend's resources. Runs after Close fail with ErrClosed.
	Close() error
}

// ToolHandler serves the tool calls of an escalated run on the host: tool is the tool's name, args the call's
// JSON object. It is called from the socket server's goroutines (one per connection, so calls of one program
// are sequential) with the run's context. Return a *ToolError to choose the Python exception; any other error
// raises ToolError. Wire the governance Gate in here: every call must pass it.
type ToolHandler func(ctx context.Context, tool string, args json.RawMessage) (json.RawMessage, error)

// Defaults applied to zero-valued Limits fields.
const (
	DefaultTimeout        = 60 * time.Second
	DefaultMemory         = 512 << 20
	DefaultCPUs           = 1.0
	DefaultPids           = 128
	DefaultWorkspaceBytes = 64 << 20
	DefaultTmpBytes       = 64 << 20
	DefaultOutputLimit    = 1 << 20
	DefaultFilesOutCount  = 10000
	DefaultPython         = "python3"

	// Workdir is the workspace inside the container: a size-limited tmpfs, the only writable place with /tmp.
	Workdir = "/workspace"
	// RunDir holds what the host provides to a run (read-only bind mount): the tool socket tools.sock, the
	// bootstrap, the program and the Python client module (on PYTHONPATH as wasmbox_tools).
	RunDir = "/run/wasmbox"
	// User is the uid:gid every container runs as.
	User = "65534:65534"
)

// Limits bound one run. Every zero value means a default; negative values are invalid.
type Limits struct {
	// Timeout bounds the run from the image check to the program's exit (the container is killed then);
	// removing the container afterwards is not counted. Zero: DefaultTimeout (60 s). The context's own deadline
	// applies too, whichever comes first.
	Timeout time.Duration
	// Memory is the container's memory limit in bytes, swap included (no swap). Zero: 512 MiB. Minimum 16 MiB.
	Memory int64
	// CPUs is the number of CPUs' worth of time the container may use. Zero: 1.
	CPUs float64
	// Pids caps the number of processes and threads. Zero: 128. Under runsc the sandbox's own threads count
	// too, and going over kills the sandbox instead of failing fork/clone with EAGAIN.
	Pids int64
	// WorkspaceBytes is the size of the /workspace tmpfs (the input files count against it); TmpBytes the size
	// of /tmp. Zero: 64 MiB each. Both count against Memory as well.
	WorkspaceBytes, TmpBytes int64
	// StdoutBytes and StderrBytes cap the captured output; the rest is read and dropped, a marker is appended
	// and the Truncated flag set. Zero: 1 MiB each.
	StdoutBytes, StderrBytes int
	// FilesOutBytes caps the bytes of changed files read back, their paths included. Zero: WorkspaceBytes.
	FilesOutBytes int64
	// FilesOutCount caps the number of changed files read back, deleted input files included. Zero: 10,000.
	FilesOutCount int
}

// Job is one program to run in a container.
type Job struct {
	// Image is the image to run; it must already be in the engine (ErrImageNotFound otherwise: never pulled).
	// Unless Direct is set, it must contain a Python 3 interpreter named Python.
	Image string
	// Code is Python source to run (as /run/wasmbox/code/main.py with the workspace as working directory).
	// Exactly one of Code and Argv must be set.
	Code string
	// Argv is a command to run instead, e.g. {"python3", "-m", "pip", "install", ...}, looked up in PATH.
	Argv []string
	// Env is the program's whole environment besides HOME=/workspace, TMPDIR=/tmp, PYTHONDONTWRITEBYTECODE=1,
	// PYTHONPATH (which makes wasmbox_tools importable; a PYTHONPATH given here comes first) and the image's
	// own ENV. Nothing of the host's environment is passed.
	Env map[string]string
	// Files are copied into the workspace before the program starts: slash-separated paths relative to the
	// workspace ("data/in.csv"), no "..", no absolute paths.
	Files map[string][]byte
	// Dir, if set, is a host directory whose regular files and directories are copied into the workspace
	// too (Files win on conflicts). Symbolic links and special files are refused.
	Dir string
	// Stdin is the program's standard input; nil means empty.
	Stdin []byte
	// Tools serves the program's tool calls (import wasmbox_tools). Nil: every call raises ToolDenied.
	Tools ToolHandler
	// Limits bound the run; zero values are safe defaults.
	Limits Limits
	// Python is the interpreter in the image used for the bootstrap and for Code. Empty: "python3".
	Python string
	// Direct runs Argv as the container's only process, without the Python bootstrap, for images without
	// Python. Then Code, Files and Dir must be empty and no files are read back; Tools still works for a
	// program that speaks the socket protocol.
	Direct bool
	// Labels are added to the container's labels.
	Labels map[string]string
}

// Result is the outcome of a run.
type Result struct {
	// ExitCode is the program's exit code; 128+n when signal n killed it (137 for SIGKILL).
	ExitCode int
	// OOMKilled is set when the engine reports an OOM kill in the container, or when the program died of a
	// SIGKILL that the backend did not send (inside a container without capabilities only the kernel's OOM
	// killer or the program itself can send one).
	OOMKilled bool
	// TimedOut is set when the backend killed the container at the deadline (Run's error says so too).
	TimedOut bool
	// Stdout and Stderr are what the program wrote, within the limits; when output was dropped they end with
	// "[escalate: output truncated: N more bytes dropped]" and the Truncated flag is set.
	Stdout, Stderr                   string
	StdoutTruncated, StderrTruncated bool
	// Files holds the content of the files the program created or modified in the workspace (slash paths);
	// Changes lists those and the deleted ones, sorted by path. Empty when the run timed out.
	Files   map[string][]byte
	Changes []FileChange
	// FilesTruncated is set when files were not read back: over Limits.FilesOutBytes, or the transfer did not
	// finish (the program was killed before it could complete).
	FilesTruncated bool
	// Duration is the wall time from container creation to exit.
	Duration time.Duration
	// Runtime is the OCI runtime that ran the container ("runc", "runsc").
	Runtime string
}

// FileChange is one workspace file the program created, modified or deleted. The shape matches
// wasmbox.FileChange so one workspace can move between the wasm sandbox and an escalated run.
type FileChange struct {
	Path string `json:"path"`
	Kind string `json:"kind"` // "created", "modified" or "deleted"
	Size int64  `json:"size"`
}

// Err returns nil for a run that exited 0, and an *ExitError otherwise (errors.Is(err, ErrOOM) for an OOM kill).
func (r *Result) Err() error {
	if r == nil || (r.ExitCode == 0 && !r.OOMKilled) {
		return nil
	}
	return &ExitError{Code: r.ExitCode, OOMKilled: r.OOMKilled}
}

// job is a validated Job with defaults applied and the input files gathered.
type job struct {
	Job
	files map[string][]byte
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidJob, fmt.Sprintf(format, args...))
}

// prepare validates j and returns a copy with defaults applied; it never modifies the caller's Job.
func prepare(j Job) (*job, error) {
	if j.Image == "" {
		return nil, invalid("Image is empty")
	}
	if (j.Code == "") == (len(j.Argv) == 0) {
		return nil, invalid("exactly one of Code and Argv must be set")
	}
	for _, a := range j.Argv {
		if strings.ContainsRune(a, 0) {
			return nil, invalid("Argv contains NUL")
		}
	}
	if len(j.Argv) > 0 && j.Argv[0] == "" {
		return nil, invalid("Argv[0] is empty")
	}
	if j.Direct && (j.Code != "" || len(j.Files) > 0 || j.Dir != "") {
		return nil, invalid("Direct runs take only Argv (no Code, Files or Dir)")
	}
	for k, v := range j.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return nil, invalid("Env has an invalid entry %q", k)
		}
	}
	l := &j.Limits
	if l.Timeout < 0 || l.Memory < 0 || l.CPUs < 0 || l.Pids < 0 || l.WorkspaceBytes < 0 || l.TmpBytes < 0 ||
		l.StdoutBytes < 0 || l.StderrBytes < 0 || l.FilesOutBytes < 0 || l.FilesOutCount < 0 {
		return nil, invalid("a limit is negative")
	}
	if l.Memory > 0 && l.Memory < 16<<20 {
		return nil, invalid("Limits.Memory is below 16 MiB")
	}
	if l.Timeout == 0 {
		l.Timeout = DefaultTimeout
	}
	if l.Memory == 0 {
		l.Memory = DefaultMemory
	}
	if l.CPUs == 0 {
		l.CPUs = DefaultCPUs
	}
	if l.Pids == 0 {
		l.Pids = DefaultPids
	}
	if l.WorkspaceBytes == 0 {
		l.WorkspaceBytes = DefaultWorkspaceBytes
	}
	if l.TmpBytes == 0 {
		l.TmpBytes = DefaultTmpBytes
	}
	if l.StdoutBytes == 0 {
		l.StdoutBytes = DefaultOutputLimit
	}
	if l.StderrBytes == 0 {
		l.StderrBytes = DefaultOutputLimit
	}
	if l.FilesOutBytes == 0 {
		l.FilesOutBytes = l.WorkspaceBytes
	}
	if l.FilesOutCount == 0 {
		l.FilesOutCount = DefaultFilesOutCount
	}
	if j.Python == "" {
		j.Python = DefaultPython
	}
	env := make(map[string]string, len(j.Env))
	for k, v := range j.Env {
		env[k] = v
	}
	j.Env = env
	j.Argv = append([]string(nil), j.Argv...)
	labels := make(map[string]string, len(j.Labels))
	for k, v := range j.Labels {
		labels[k] = v
	}
	j.Labels = labels

	files := map[string][]byte{}
	var total int64
	if j.Dir != "" {
		if err := readDir(j.Dir, files, &total, l.WorkspaceBytes); err != nil {
			return nil, err
		}
	}
	for name, data := range j.Files {
		p, err := cleanPath(name)
		if err != nil {
			return nil, err
		}
		if old, ok := files[p]; ok {
			total -= int64(len(old))
		}
		files[p] = data
		total += int64(len(data))
	}
	if total > l.WorkspaceBytes {
		return nil, invalid("the input files (%d bytes) exceed Limits.WorkspaceBytes (%d)", total, l.WorkspaceBytes)
	}
	j.Files = nil
	return &job{Job: j, files: files}, nil
}

// Path bounds, for the input files and for everything the container sends back: a workspace path is at most
// MaxPathBytes long, has at most MaxPathDepth components, each at most MaxNameBytes (the NAME_MAX of the
// container's file systems).
const (
	MaxPathBytes = 4096
	MaxPathDepth = 256
	MaxNameBytes = 255
)

// cleanPath checks a workspace path and returns its clean slash form. It looks at the name's bytes before
// allocating anything in proportion to them.
func cleanPath(name string) (string, error) {
	if len(name) > MaxPathBytes {
		return "", invalid("workspace path of %d bytes (at most %d)", len(name), MaxPathBytes)
	}
	if name == "" || strings.ContainsRune(name, 0) || strings.HasPrefix(name, "/") || strings.Contains(name, "\\") {
		return "", invalid("bad workspace path %q", name)
	}
	depth := 0
	for rest := name; rest != ""; {
		var part string
		part, rest, _ = strings.Cut(rest, "/")
		switch {
		case part == "..":
			return "", invalid("workspace path %q leaves the workspace", name)
		case len(part) > MaxNameBytes:
			return "", invalid("workspace path %q has a name longer than %d bytes", name, MaxNameBytes)
		case part != "" && part != ".":
			if depth++; depth > MaxPathDepth {
				return "", invalid("workspace path %q is more than %d levels deep", name, MaxPathDepth)
			}
		}
	}
	p := path.Clean(name)
	if p == "." {
		return "", invalid("bad workspace path %q", name)
	}
	return p, nil
}

// readDir adds the regular files below dir to files, refusing symlinks and special files.
func readDir(dir string, files map[string][]byte, total *int64, limit int64) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return invalid("Dir: %v", err)
	}
	defer root.Close()
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return invalid("Dir: %v", err)
		}
		switch {
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return invalid("Dir: %s is not a regular file or directory", filepath.Join(dir, p))
		}
		info, err := d.Info()
		if err != nil {
			return invalid("Dir: %v", err)
		}
		if *total+info.Size() > limit {
			return invalid("Dir: the files exceed Limits.WorkspaceBytes (%d)", limit)
		}
		data, err := root.ReadFile(p)
		if err != nil {
			return invalid("Dir: %v", err)
		}
		files[p] = data
		*total += int64(len(data))
		return nil
	})
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
