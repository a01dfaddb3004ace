package escalate

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
)

// Labels set on every container this package creates. LabelRun's value is the run's ID (the container's name
// without the "wasmbox-" prefix).
const (
	LabelManaged = "org.wasmbox.escalate"
	LabelRun     = "org.wasmbox.escalate.run"
)

// cleanupTimeout bounds killing and removing a container after the run, on a context detached from the run's.
// backstopGrace is added to the timeout for the bootstrap's own deadline, which only matters when this process
// died mid-run (it then leaves a stopped container behind for Prune).
const (
	cleanupTimeout = 30 * time.Second
	backstopGrace  = 10 * time.Second
)

// DockerConfig configures a Docker backend. The zero value talks to $DOCKER_HOST (or the default socket) with
// runc.
type DockerConfig struct {
	// Host is the engine's address, e.g. "unix:///run/docker.sock". Empty: $DOCKER_HOST, else
	// unix:///var/run/docker.sock. The engine must run on this machine: the run directory (tool socket,
	// bootstrap, input files) is bind-mounted from TempDir.
	Host string
	// Runtime is the OCI runtime registered with the engine: "" or "runc" (default), "runsc" for gVisor. NewDocker
	// checks that it is registered (ErrRuntimeNotFound) and, for runsc, that it runs with --oci-seccomp
	// (ErrUnenforceable otherwise: Docker's seccomp profile would not apply inside the sandbox).
	Runtime string
	// TempDir is where per-run directories are created (mode 0700). Empty: os.TempDir(). The path of the tool
	// socket below it must fit in 107 bytes.
	TempDir string
	// Labels are added to every container's labels.
	Labels map[string]string
	// Logger receives debug events. Nil: no logging.
	Logger hclog.Logger
}

// Docker runs jobs through the Docker Engine API, hardened. It is safe for concurrent use.
type Docker struct {
	cli     *client.Client
	host    string
	runtime string
	labels  map[string]string
	tempDir string
	log     hclog.Logger
	closed  atomic.Bool
}

var _ Backend = (*Docker)(nil)

// NewDocker connects to the engine, negotiates the API version and checks that the engine can enforce the
// hardening: a reachable engine (ErrNoEngine), a shared API version (ErrEngineVersion), the runtime
// (ErrRuntimeNotFound), memory, pids and CPU limits and a seccomp profile (ErrUnenforceable).
func NewDocker(ctx context.Context, cfg DockerConfig) (*Docker, error) {
	host := cfg.Host
	if host == "" {
		host = os.Getenv(client.EnvOverrideHost)
	}
	if host == "" {
		host = client.DefaultDockerHost
	}
	cli, err := client.New(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrNoEngine, host, err)
	}
	d := &Docker{cli: cli, host: host, runtime: cfg.Runtime, tempDir: cfg.TempDir, log: cfg.Logger,
		labels: map[string]string{}}
	if d.runtime == "" {
		d.runtime = "runc"
	}
	if d.tempDir == "" {
		d.tempDir = os.TempDir()
	}
	if d.log == nil {
		d.log = hclog.NewNullLogger()
	}
	for k, v := range cfg.Labels {
		d.labels[k] = v
	}
	if err := d.check(ctx); err != nil {
		cli.Close()
		return nil, err
	}
	return d, nil
}

// check pings the engine (negotiating the API version) and verifies what the hardening needs.
func (d *Docker) check(ctx context.Context) error {
	ping, err := d.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	if err != nil {
		return d.classify("ping", err)
	}
	info, err := d.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return d.classify("info", err)
	}
	d.log.Debug("engine", "host", d.host, "version", info.Info.ServerVersion, "engine_api", ping.APIVersion,
		"client_api", d.cli.ClientVersion())
	i := info.Info
	var missing []string
	if !i.MemoryLimit {
		missing = append(missing, "memory limits")
	}
	if !i.PidsLimit {
		missing = append(missing, "pids limits")
	}
	if !i.CPUCfsQuota {
		missing = append(missing, "CPU quotas")
	}
	seccomp := false
	for _, o := range i.SecurityOptions {
		if strings.HasPrefix(o, "name=seccomp") && !strings.Contains(o, "profile=unconfined") {
			seccomp = true
		}
	}
	if !seccomp {
		missing = append(missing, "a seccomp profile")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: engine %s does not support %s", ErrUnenforceable, d.host, strings.Join(missing, ", "))
	}
	rt, ok := i.Runtimes[d.runtime]
	if !ok {
		names := sortedKeys(i.Runtimes)
		return fmt.Errorf("%w: %q (the engine has %s)", ErrRuntimeNotFound, d.runtime, strings.Join(names, ", "))
	}
	if d.runtime == "runsc" || path.Base(rt.Path) == "runsc" {
		ok := false
		for _, a := range rt.Args {
			if a == "--oci-seccomp" || a == "--oci-seccomp=true" || a == "-oci-seccomp" {
				ok = true
			}
		}
		if !ok {
			return fmt.Errorf("%w: runtime %q (gVisor) is registered without --oci-seccomp, so the default "+
				"seccomp profile would not apply inside the sandbox", ErrUnenforceable, d.runtime)
		}
	}
	return nil
}

// Name returns "docker/" followed by the runtime.
func (d *Docker) Name() string { return "docker/" + d.runtime }

// APIVersion is the negotiated Engine API version.
func (d *Docker) APIVersion() string { return d.cli.ClientVersion() }

// Close closes the client's idle connections. Runs in flight still clean up after themselves.
func (d *Docker) Close() error {
	d.closed.Store(true)
	return d.cli.Close()
}

var versionErr = regexp.MustCompile(`(?i)client version \S+ is too (old|new)|API version \S+ is not supported|minimum supported API version|maximum supported API version`)

// classify wraps an engine error with the matching sentinel.
func (d *Docker) classify(op string, err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return fmt.Errorf("escalate: %s: %w", op, err)
	case client.IsErrConnectionFailed(err):
		return fmt.Errorf("%w: %s: %w", ErrNoEngine, op, err)
	case versionErr.MatchString(err.Error()):
		return fmt.Errorf("%w: %s %s (client API %s): %w", ErrEngineVersion, op, d.host, d.cli.ClientVersion(), err)
	default:
		return fmt.Errorf("%w: %s: %w", ErrEngine, op, err)
	}
}

// Run runs job in a fresh container; see Backend.Run.
func (d *Docker) Run(ctx context.Context, job Job) (res *Result, err error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	j, err := prepare(job)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, j.Limits.Timeout)
	defer cancel()
	// The tool socket ends the job (killing the container) when the program goes past one of its hard bounds.
	ctx, endJob := context.WithCancelCause(ctx)
	defer endJob(nil)

	// The image must be there: never pull.
	if _, err := d.cli.ImageInspect(ctx, j.Image); err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("%w: %q on %s", ErrImageNotFound, j.Image, d.host)
		}
		return nil, d.classify("image inspect", err)
	}

	id, err := randomID()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(d.tempDir, "wasmbox-escalate-")
	if err != nil {
		return nil, fmt.Errorf("escalate: run directory: %w", err)
	}
	defer os.RemoveAll(dir)
	runDir := filepath.Join(dir, "run")
	sock := filepath.Join(runDir, "tools.sock")
	if len(sock) > 107 {
		return nil, fmt.Errorf("%w: the socket path %s is too long; set DockerConfig.TempDir to a shorter directory", ErrInvalidJob, sock)
	}
	if err := writeRunDir(runDir, j); err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("escalate: tool socket: %w", err)
	}
	// Only uid 65534 in the container and root can reach it: the parent directory is 0700.
	if err := os.Chmod(sock, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("escalate: tool socket: %w", err)
	}
	srv := newRunServer(ctx, j.Tools, j.files, serverLimits{outBytes: j.Limits.FilesOutBytes, outFiles: j.Limits.FilesOutCount})
	srv.onFail = endJob
	srv.serve(ln)
	defer srv.close()

	name := "wasmbox-" + id
	cfg, hostCfg := d.containerConfig(j, id, runDir)
	start := time.Now()
	res = &Result{Runtime: d.runtime}
	created, err := d.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: hostCfg})
	// From here on, the container is removed on every path, even if the create request failed half-way (the
	// engine may have created it anyway: remove by name).
	ref := name
	if err == nil {
		ref = created.ID
	}
	defer func() {
		if rerr := d.remove(ctx, ref); rerr != nil && err == nil {
			err = rerr
		}
	}()
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("%w: %q on %s: %w", ErrImageNotFound, j.Image, d.host, err)
		}
		return nil, d.classify("create", err)
	}
	d.log.Debug("created", "container", created.ID, "name", name, "runtime", d.runtime)

	attach, err := d.cli.ContainerAttach(ctx, created.ID, client.ContainerAttachOptions{
		Stream: true, Stdin: j.Stdin != nil, Stdout: true, Stderr: true})
	if err != nil {
		return nil, d.classify("attach", err)
	}
	defer attach.Close()
	stdout := &cappedBuffer{limit: j.Limits.StdoutBytes}
	stderr := &cappedBuffer{limit: j.Limits.StderrBytes}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		stdcopy.StdCopy(stdout, stderr, attach.Reader)
	}()

	wait := d.cli.ContainerWait(ctx, created.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := d.cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		return nil, d.classify("start", err)
	}
	if j.Stdin != nil {
		go func() {
			attach.Conn.Write(j.Stdin)
			attach.CloseWrite()
		}()
	}

	finish := func() {
		// The attach stream ends when the container exits; don't wait for it forever.
		select {
		case <-copied:
		case <-time.After(5 * time.Second):
			attach.Close()
			<-copied
		}
		res.Duration = time.Since(start)
		res.Stdout, res.StdoutTruncated = stdout.result()
		res.Stderr, res.StderrTruncated = stderr.result()
	}

	var exitCode int64
	waited := true
	select {
	case w := <-wait.Result:
		exitCode = w.StatusCode
		if w.Error != nil && w.Error.Message != "" {
			d.log.Debug("wait error", "container", created.ID, "error", w.Error.Message)
		}
	case werr := <-wait.Error:
		if ctx.Err() == nil {
			return nil, d.classify("wait", werr)
		}
	case <-ctx.Done():
		waited = false
	}
	if ctx.Err() != nil {
		if !waited { // the wait goroutine sends exactly one of these; let it finish
			go func() {
				select {
				case <-wait.Result:
				case <-wait.Error:
				}
			}()
		}
		// Deadline or cancellation: kill now (remove follows in the deferred cleanup).
		kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		_, kerr := d.cli.ContainerKill(kctx, created.ID, client.ContainerKillOptions{Signal: "KILL"})
		kcancel()
		if kerr != nil && !cerrdefs.IsNotFound(kerr) && !cerrdefs.IsConflict(kerr) {
			d.log.Debug("kill failed", "container", created.ID, "error", kerr)
		}
		finish()
		res.TimedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
		res.ExitCode = 137
		res.FilesTruncated = !j.Direct
		cause := ctx.Err()
		if serr := srv.err(); serr != nil {
			cause = serr
		}
		return res, fmt.Errorf("escalate: run %s killed after %s: %w", name, res.Duration.Round(time.Millisecond), cause)
	}
	finish()
	res.ExitCode = int(exitCode)

	ictx, icancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	insp, ierr := d.cli.ContainerInspect(ictx, created.ID, client.ContainerInspectOptions{})
	icancel()
	if ierr != nil {
		return res, d.classify("inspect", ierr)
	}
	res.OOMKilled = insp.Container.State.OOMKilled || res.ExitCode == 137

	srv.close() // no more requests: the container is gone
	if !j.Direct {
		var complete bool
		res.Files, res.Changes, complete = srv.changes(j.files)
		res.FilesTruncated = !complete
	}
	if serr := srv.err(); serr != nil { // went past a hard bound just before its exit
		res.Files, res.Changes, res.FilesTruncated = nil, nil, !j.Direct
		return res, fmt.Errorf("escalate: run %s: %w", name, serr)
	}
	return res, nil
}

// Prune removes the containers of this package (label LabelManaged) created more than olderThan ago, running or
// not, and returns how many it removed. Runs remove their own containers; Prune is for those left behind by a
// process that died mid-run. Choose olderThan above the longest Limits.Timeout in use: it also kills the runs of
// other processes using the same engine.
func (d *Docker) Prune(ctx context.Context, olderThan time.Duration) (int, error) {
	list, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", LabelManaged+"=1")})
	if err != nil {
		return 0, d.classify("list containers", err)
	}
	n := 0
	cutoff := time.Now().Add(-olderThan).Unix()
	for _, c := range list.Items {
		if c.Created > cutoff {
			continue
		}
		if err := d.remove(ctx, c.ID); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// remove force-removes a container (killing it if needed) on a context detached from the run's.
func (d *Docker) remove(ctx context.Context, ref string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_, err := d.cli.ContainerRemove(rctx, ref, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return d.classify("remove container "+ref, err)
	}
	return nil
}

// containerConfig builds the hardened container configuration.
func (d *Docker) containerConfig(j *job, id, runDir string) (*container.Config, *container.HostConfig) {
	env := map[string]string{
		"HOME":                    Workdir,
		"TMPDIR":                  "/tmp",
		"PYTHONDONTWRITEBYTECODE": "1",
	}
	for k, v := range j.Env {
		env[k] = v
	}
	env["PYTHONPATH"] = RunDir + "/lib"
	if p := j.Env["PYTHONPATH"]; p != "" {
		env["PYTHONPATH"] = p + ":" + RunDir + "/lib"
	}
	envList := make([]string, 0, len(env))
	for _, k := range sortedKeys(env) {
		envList = append(envList, k+"="+env[k])
	}

	var entrypoint []string
	if j.Direct {
		entrypoint = j.Argv
	} else {
		entrypoint = []string{j.Python, "-I", "-S", RunDir + "/boot.py"}
	}
	labels := map[string]string{}
	for k, v := range d.labels {
		labels[k] = v
	}
	for k, v := range j.Labels {
		labels[k] = v
	}
	labels[LabelManaged] = "1"
	labels[LabelRun] = id

	cfg := &container.Config{
		Image:           j.Image,
		Entrypoint:      entrypoint,
		Cmd:             []string{},
		Env:             envList,
		WorkingDir:      Workdir,
		User:            User,
		Hostname:        "wasmbox",
		Labels:          labels,
		NetworkDisabled: true,
		AttachStdout:    true,
		AttachStderr:    true,
		AttachStdin:     j.Stdin != nil,
		OpenStdin:       j.Stdin != nil,
		StdinOnce:       j.Stdin != nil,
	}
	pids := j.Limits.Pids
	hostCfg := &container.HostConfig{
		NetworkMode:    "none",
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"}, // and the engine's default seccomp profile
		Privileged:     false,
		IpcMode:        "private",
		LogConfig:      container.LogConfig{Type: "none"}, // output is read from the attach stream, bounded
		Runtime:        d.runtime,
		RestartPolicy:  container.RestartPolicy{Name: container.RestartPolicyDisabled},
		Tmpfs: map[string]string{
			Workdir: fmt.Sprintf("rw,nosuid,nodev,exec,size=%d,mode=0700,uid=65534,gid=65534", j.Limits.WorkspaceBytes),
			"/tmp":  fmt.Sprintf("rw,nosuid,nodev,size=%d,mode=1777", j.Limits.TmpBytes),
		},
		Mounts: []mount.Mount{{Type: mount.TypeBind, Source: runDir, Target: RunDir, ReadOnly: true}},
		Resources: container.Resources{
			Memory:     j.Limits.Memory,
			MemorySwap: j.Limits.Memory, // no swap
			NanoCPUs:   int64(j.Limits.CPUs * 1e9),
			PidsLimit:  &pids,
		},
	}
	return cfg, hostCfg
}

// writeRunDir fills the directory bind-mounted read-only at RunDir.
func writeRunDir(runDir string, j *job) error {
	fail := func(err error) error { return fmt.Errorf("escalate: run directory: %w", err) }
	if err := os.MkdirAll(filepath.Join(runDir, "lib"), 0o755); err != nil {
		return fail(err)
	}
	// MkdirTemp made the parent 0700; the mounted directory itself must be readable by uid 65534.
	for _, p := range []string{runDir, filepath.Join(runDir, "lib")} {
		if err := os.Chmod(p, 0o755); err != nil {
			return fail(err)
		}
	}
	write := func(name string, data []byte) error {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(runDir, name)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(runDir, name), data, 0o644)
	}
	if err := write("lib/wasmbox_tools.py", toolsPy); err != nil {
		return fail(err)
	}
	if j.Direct {
		return nil
	}
	argv := j.Argv
	if j.Code != "" {
		if err := write("code/main.py", []byte(j.Code)); err != nil {
			return fail(err)
		}
		argv = []string{j.Python, RunDir + "/code/main.py"}
	}
	spec, _ := json.Marshal(map[string]any{"argv": argv, "workdir": Workdir, "files_out": true,
		"backstop_seconds": (j.Limits.Timeout + backstopGrace).Seconds()})
	if err := write("job.json", spec); err != nil {
		return fail(err)
	}
	if err := write("boot.py", bootPy); err != nil {
		return fail(err)
	}
	if len(j.files) > 0 {
		var buf bytes.Buffer
		if err := writeTar(&buf, j.files); err != nil {
			return fail(err)
		}
		if err := write("in.tar", buf.Bytes()); err != nil {
			return fail(err)
		}
	}
	return nil
}

// writeTar writes files (and their parent directories) as a tar archive of regular files.
func writeTar(w io.Writer, files map[string][]byte) error {
	tw := tar.NewWriter(w)
	dirs := map[string]bool{}
	for _, p := range sortedKeys(files) {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	var dirList []string
	for d := range dirs {
		dirList = append(dirList, d)
	}
	sort.Strings(dirList)
	for _, d := range dirList {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755}); err != nil {
			return err
		}
	}
	for _, p := range sortedKeys(files) {
		data := files[p]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: 0o644, Size: int64(len(data))}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	return tw.Close()
}

func randomID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("escalate: random: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// cappedBuffer keeps the first limit bytes written and counts the rest.
type cappedBuffer struct {
	mu      sync.Mutex
	limit   int
	buf     bytes.Buffer
	dropped int64
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.limit - c.buf.Len()
	if room >= len(p) {
		c.buf.Write(p)
	} else {
		if room > 0 {
			c.buf.Write(p[:room])
		}
		c.dropped += int64(len(p) - max(room, 0))
	}
	return len(p), nil
}

func (c *cappedBuffer) result() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped == 0 {
		return c.buf.String(), false
	}
	return c.buf.String() + fmt.Sprintf("\n[escalate: output truncated: %d more bytes dropped]\n", c.dropped), true
}
