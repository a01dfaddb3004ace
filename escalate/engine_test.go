package escalate

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// These tests run real containers. They use the engines named by WASMBOX_DOCKER_HOSTS (comma-separated, as
// exported by .ci/escalation.sh), else WASMBOX_DOCKER_HOST, else DOCKER_HOST; and the image WASMBOX_TEST_IMAGE
// (default wasmbox-test-python:latest, a Python 3 with pip). Without a reachable engine they skip — except when
// CI=true, where they fail: CI must run them. runsc tests skip when runsc is not registered, unless
// WASMBOX_RUNSC is set (the script sets it), where they fail.

func testImage() string {
	if s := os.Getenv("WASMBOX_TEST_IMAGE"); s != "" {
		return s
	}
	return "wasmbox-test-python:latest"
}

func engineHosts() []string {
	for _, v := range []string{"WASMBOX_DOCKER_HOSTS", "WASMBOX_DOCKER_HOST", "DOCKER_HOST"} {
		if s := os.Getenv(v); s != "" {
			var hosts []string
			for _, h := range strings.Split(s, ",") {
				if h = strings.TrimSpace(h); h != "" {
					hosts = append(hosts, h)
				}
			}
			return hosts
		}
	}
	return nil
}

func missingEngine(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: the engine tests must run; start engines with .ci/escalation.sh)", msg)
	}
	t.Skipf("%s; start engines with: eval \"$(sudo .ci/escalation.sh)\"", msg)
}

// forEachEngine runs fn against every configured engine with the given runtime.
func forEachEngine(t *testing.T, runtime string, fn func(t *testing.T, d *Docker)) {
	t.Helper()
	hosts := engineHosts()
	if len(hosts) == 0 {
		missingEngine(t, "no engine configured (WASMBOX_DOCKER_HOSTS, WASMBOX_DOCKER_HOST, DOCKER_HOST)")
	}
	for _, h := range hosts {
		t.Run(engineName(h), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			d, err := NewDocker(ctx, DockerConfig{Host: h, Runtime: runtime, Labels: map[string]string{"org.wasmbox.test": t.Name()}})
			switch {
			case errors.Is(err, ErrNoEngine):
				missingEngine(t, "engine %s not reachable: %v", h, err)
			case errors.Is(err, ErrRuntimeNotFound) && runtime == "runsc" && os.Getenv("WASMBOX_RUNSC") == "":
				t.Skipf("runsc is not registered with %s: %v", h, err)
			case err != nil:
				t.Fatal(err)
			}
			defer d.Close()
			fn(t, d)
		})
	}
}

func engineName(host string) string {
	return strings.ReplaceAll(strings.TrimPrefix(strings.TrimPrefix(host, "unix://"), "tcp://"), "/", "_")
}

func run(t *testing.T, d *Docker, job Job) *Result {
	t.Helper()
	if job.Image == "" {
		job.Image = testImage()
	}
	start := time.Now()
	res, err := d.Run(t.Context(), job)
	if err != nil {
		if errors.Is(err, ErrImageNotFound) {
			missingEngine(t, "image %s missing", job.Image)
		}
		t.Fatalf("Run: %v", err)
	}
	t.Logf("%s: exit %d in %s (container %s)", d.Name(), res.ExitCode, time.Since(start).Round(time.Millisecond), res.Duration.Round(time.Millisecond))
	return res
}

// assertNoContainers checks that no container with the run label (or any of this test's) is left.
func assertNoContainers(t *testing.T, d *Docker) {
	t.Helper()
	list, err := d.cli.ContainerList(context.Background(), client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", "org.wasmbox.test="+t.Name())})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Fatalf("%d container(s) left behind: %+v", len(list.Items), list.Items[0].Names)
	}
}

const probe = `
import errno, json, os
st = {}
for line in open("/proc/self/status"):
    k, _, v = line.partition(":")
    st[k] = v.split()
out = {"uid": st["Uid"], "gid": st["Gid"], "capeff": st["CapEff"][0], "seccomp": st["Seccomp"][0],
       "nnp": st["NoNewPrivs"][0], "cwd": os.getcwd()}
try:
    # /var/tmp is world-writable in the fixture image, so only a read-only rootfs can refuse this.
    open("/var/tmp/rootfs-write-test" if os.path.isdir("/var/tmp") else "/rootfs-write-test", "w")
    out["rootfs"] = "writable"
except OSError as e:
    out["rootfs"] = errno.errorcode[e.errno]
try:
    out["net"] = sorted(os.listdir("/sys/class/net"))
except FileNotFoundError:
    out["net"] = None
open("written-here", "w").write("ok")
out["tmp"] = open("/tmp/x", "w").write("ok")
print(json.dumps(out))
`

func TestHardening(t *testing.T) {
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) {
			forEachEngine(t, rt, func(t *testing.T, d *Docker) {
				res := run(t, d, Job{Code: probe})
				if res.ExitCode != 0 {
					t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
				}
				var got struct {
					UID, GID                  []string
					CapEff, Seccomp, NNP, CWD string
					Rootfs                    string
					Net                       []string
				}
				if err := json.Unmarshal([]byte(res.Stdout), &got); err != nil {
					t.Fatalf("%v: %q", err, res.Stdout)
				}
				if strings.Join(got.UID, " ") != "65534 65534 65534 65534" || strings.Join(got.GID, " ") != "65534 65534 65534 65534" {
					t.Errorf("uid %v gid %v, want 65534 everywhere", got.UID, got.GID)
				}
				if got.CapEff != "0000000000000000" {
					t.Errorf("CapEff %s, want none", got.CapEff)
				}
				if got.Seccomp != "2" {
					t.Errorf("Seccomp %s, want 2 (filter)", got.Seccomp)
				}
				if got.NNP != "1" {
					t.Errorf("NoNewPrivs %s, want 1", got.NNP)
				}
				if got.Rootfs != "EROFS" {
					t.Errorf("rootfs write: %s, want EROFS", got.Rootfs)
				}
				// gVisor has no /sys/class/net without a network stack: nothing at all is fine too.
				if got.Net != nil && strings.Join(got.Net, ",") != "lo" {
					t.Errorf("network interfaces %v, want only lo", got.Net)
				}
				if got.CWD != Workdir {
					t.Errorf("cwd %s, want %s", got.CWD, Workdir)
				}
				if string(res.Files["written-here"]) != "ok" {
					t.Errorf("workspace file not read back: %v", res.Changes)
				}
				assertNoContainers(t, d)
			})
		})
	}
}

func TestOOM(t *testing.T) {
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) {
			forEachEngine(t, rt, func(t *testing.T, d *Docker) {
				res := run(t, d, Job{
					Code:   "x = []\nfor i in range(400):\n    x.append(bytearray(1 << 20))\nprint('survived')\n",
					Limits: Limits{Memory: 64 << 20},
				})
				if !res.OOMKilled || !errors.Is(res.Err(), ErrOOM) || strings.Contains(res.Stdout, "survived") {
					t.Fatalf("want an OOM kill; got exit %d OOMKilled=%v err=%v stdout=%q stderr=%q",
						res.ExitCode, res.OOMKilled, res.Err(), res.Stdout, res.Stderr)
				}
				assertNoContainers(t, d)
			})
		})
	}
}

func TestPidsLimit(t *testing.T) {
	// runc only: under runsc the sandbox's own threads count, and going over kills the sandbox.
	forEachEngine(t, "runc", func(t *testing.T, d *Docker) {
		res := run(t, d, Job{
			Code: `
import os, time
n = 0
try:
    while n < 500:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
    print("no limit", n)
except OSError as e:
    print("errno", e.errno, "after", n)
`,
			Limits: Limits{Pids: 24},
		})
		if !strings.HasPrefix(res.Stdout, "errno 11 ") { // EAGAIN
			t.Fatalf("want EAGAIN from fork; got %q %q", res.Stdout, res.Stderr)
		}
		assertNoContainers(t, d)
	})
}

func TestDeadlineKillsAndRemoves(t *testing.T) {
	forEachEngine(t, "runc", func(t *testing.T, d *Docker) {
		start := time.Now()
		res, err := d.Run(t.Context(), Job{Image: testImage(), Code: "import sys\nprint('started', flush=True)\nwhile True: pass\n",
			Limits: Limits{Timeout: 3 * time.Second}})
		elapsed := time.Since(start)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want DeadlineExceeded", err)
		}
		if res == nil || !res.TimedOut || !strings.Contains(res.Stdout, "started") {
			t.Fatalf("want a partial result with the output so far, got %+v", res)
		}
		if elapsed > 10*time.Second {
			t.Errorf("took %s for a 3 s deadline", elapsed)
		}
		assertNoContainers(t, d)
	})
}

func TestCancelledContextKillsAndRemoves(t *testing.T) {
	forEachEngine(t, "runc", func(t *testing.T, d *Docker) {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(1500*time.Millisecond, cancel)
		_, err := d.Run(ctx, Job{Image: testImage(), Code: "while True: pass\n"})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want Canceled", err)
		}
		assertNoContainers(t, d)
	})
}

func TestToolsOverSocket(t *testing.T) {
	code := `
import wasmbox_tools as tools
print(tools.call("add", a=1, b=2))
print(tools.add(a=40, b=2))
try:
    tools.call("forbidden", x=1)
except tools.ToolDenied as e:
    print("denied:", e.type, e.message)
try:
    tools.call("boom")
except tools.ToolError as e:
    print("error:", type(e).__name__, e)
try:
    tools.call("budget")
except tools.ToolDenied as e:
    print("budget:", type(e).__name__, isinstance(e, tools.ToolException))
`
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) {
			forEachEngine(t, rt, func(t *testing.T, d *Docker) {
				var calls []string
				handler := func(ctx context.Context, tool string, args json.RawMessage) (json.RawMessage, error) {
					calls = append(calls, tool+string(args))
					switch tool {
					case "add":
						var a struct{ A, B int }
						if err := json.Unmarshal(args, &a); err != nil {
							return nil, err
						}
						return json.Marshal(a.A + a.B)
					case "forbidden":
						return nil, &ToolError{Type: "ToolDenied", Message: "policy says no"}
					case "budget":
						return nil, &ToolError{Type: "BudgetExceeded", Message: "out of budget"}
					default:
						return nil, errors.New("it broke")
					}
				}
				res := run(t, d, Job{Code: code, Tools: handler})
				want := "3\n42\ndenied: ToolDenied policy says no\nerror: ToolError it broke\nbudget: BudgetExceeded True\n"
				if res.Stdout != want || res.ExitCode != 0 {
					t.Fatalf("stdout %q (stderr %q), want %q", res.Stdout, res.Stderr, want)
				}
				if len(calls) != 5 || calls[0] != `add{"a":1,"b":2}` {
					t.Errorf("handler saw %q", calls)
				}
			})
		})
	}
}

func TestNoToolsRaisesToolDenied(t *testing.T) {
	forEachEngine(t, "runc", func(t *testing.T, d *Docker) {
		res := run(t, d, Job{Code: "import wasmbox_tools as tools\ntools.call('x')\n"})
		if res.ExitCode != 1 || !strings.Contains(res.Stderr, "ToolDenied: no tools are available") {
			t.Fatalf("exit %d stderr %q", res.ExitCode, res.Stderr)
		}
	})
}

func TestWorkspaceInAndOut(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "sub", "from-dir.txt"), []byte("dir file"), 0o644)
	os.WriteFile(filepath.Join(dir, "same.txt"), []byte("overridden by Files"), 0o644)
	code := `
import os, sys
print(open("data/in.txt").read(), open("sub/from-dir.txt").read(), open("same.txt").read(), sys.stdin.read())
open("data/in.txt", "a").write(" world")
os.makedirs("out", exist_ok=True)
open("out/result.bin", "wb").write(bytes(range(256)) * 4096)
os.remove("gone.txt")
`
	forEachEngine(t, "runc", func(t *testing.T, d *Docker) {
		res := run(t, d, Job{Code: code, Dir: dir, Stdin: []byte("from stdin"), Files: map[string][]byte{
			"data/in.txt": []byte("hello"), "same.txt": []byte("same"), "gone.txt": []byte("bye")}})
		if res.ExitCode != 0 || res.Stdout != "hello dir file same from stdin\n" {
			t.Fatalf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
		}
		want := []FileChange{{"data/in.txt", "modified", 11}, {"gone.txt", "deleted", 0}, {"out/result.bin", "created", 1 << 20}}
		if fmt.Sprint(res.Changes) != fmt.Sprint(want) || res.FilesTruncated {
			t.Fatalf("changes %v (truncated %v), want %v", res.Changes, res.FilesTruncated, want)
		}
		if string(res.Files["data/in.txt"]) != "hello world" || !bytes.Equal(res.Files["out/result.bin"], bytes.Repeat(func() []byte {
			b := make([]byte, 256)
			for i := range b {
				b[i] = byte(i)
			}
			return b
		}(), 4096)) {
			t.Fatal("file contents differ")
		}
		if len(res.Files) != 2 {
			t.Errorf("files %v: unchanged files must not come back", sortedKeys(res.Files))
		}
	})
}

func TestFilesOutLimit(t *testing.T) {
	forEachEngine(t, "runc", func(t *testing.T, d *Docker) {
		res := run(t, d, Job{Code: "open('big', 'wb').write(b'x' * (3 << 20))\n", Limits: Limits{FilesOutBytes: 1 << 20}})
		if !res.FilesTruncated || len(res.Files) != 0 {
			t.Fatalf("want the transfer cut off: truncated %v files %v", res.FilesTruncated, sortedKeys(res.Files))
		}
	})
}

func TestOutputDemuxAndCaps(t *testing.T) {
	forEachEngine(t, "runc", func(t *testing.T, d *Docker) {
		res := run(t, d, Job{
			Code:   "import sys\nsys.stderr.write('err line\\n')\nsys.stdout.write('o' * (3 << 20))\nsys.exit(3)\n",
			Limits: Limits{StdoutBytes: 1000},
		})
		if !res.StdoutTruncated || len(res.Stdout) > 1100 || !strings.HasPrefix(res.Stdout, strings.Repeat("o", 1000)) ||
			!strings.Contains(res.Stdout, "output truncated") {
			t.Errorf("stdout not capped: truncated %v len %d", res.StdoutTruncated, len(res.Stdout))
		}
		if res.Stderr != "err line\n" || res.StderrTruncated {
			t.Errorf("stderr %q", res.Stderr)
		}
		if res.ExitCode != 3 || !errors.Is(res.Err(), ErrExit) || errors.Is(res.Err(), ErrOOM) || res.OOMKilled {
			t.Errorf("exit %d err %v", res.ExitCode, res.Err())
		}
	})
}

func TestDirectArgv(t *testing.T) {
	forEachEngine(t, "runc", func(t *testing.T, d *Docker) {
		res := run(t, d, Job{Argv: []string{"sh", "-c", `echo "$GREETING $(pwd)"; read -r line; echo "$line"`}, Direct: true,
			Env: map[string]string{"GREETING": "hi"}, Stdin: []byte("in")})
		if res.Stdout != "hi /workspace\nin\n" {
			t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
		}
	})
}

func TestEnvIsExplicit(t *testing.T) {
	t.Setenv("WASMBOX_SECRET_TEST", "leak")
	forEachEngine(t, "runc", func(t *testing.T, d *Docker) {
		res := run(t, d, Job{Code: "import os\nprint(sorted(os.environ))\n", Env: map[string]string{"A": "1"}})
		if strings.Contains(res.Stdout, "WASMBOX_SECRET_TEST") || !strings.Contains(res.Stdout, "'A'") {
			t.Fatalf("environment %s", res.Stdout)
		}
	})
}

func TestImageNotFoundReal(t *testing.T) {
	forEachEngine(t, "runc", func(t *testing.T, d *Docker) {
		_, err := d.Run(t.Context(), Job{Image: "wasmbox-no-such-image:never", Code: "print(1)"})
		if !errors.Is(err, ErrImageNotFound) {
			t.Fatalf("err = %v, want ErrImageNotFound", err)
		}
	})
}

func TestAPIVersionNegotiated(t *testing.T) {
	forEachEngine(t, "runc", func(t *testing.T, d *Docker) {
		ping, err := d.cli.Ping(t.Context(), client.PingOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("engine API %s, negotiated %s", ping.APIVersion, d.APIVersion())
		if d.APIVersion() != ping.APIVersion && ping.APIVersion < client.MaxAPIVersion {
			t.Fatalf("negotiated %s with an engine at %s", d.APIVersion(), ping.APIVersion)
		}
	})
}

// TestPipFromWheelhouse installs a wheel built here (PyPI is unreachable) with pip inside the container.
func TestPipFromWheelhouse(t *testing.T) {
	whl := buildWheel(t, "wbdemo", "1.0", map[string]string{
		"wbdemo/__init__.py": "def hello():\n    return 'hello from wbdemo'\n",
	})
	code := `
import subprocess, sys
try:
    import pip
except ImportError:
    print("NO-PIP"); sys.exit(0)
subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--find-links", "wheels", "--target", "site",
                "--no-cache-dir", "--disable-pip-version-check", "--no-compile", "--quiet", "wbdemo"], check=True)
sys.path.insert(0, "site")
import wbdemo
print(wbdemo.hello())
`
	forEachEngine(t, "runc", func(t *testing.T, d *Docker) {
		res := run(t, d, Job{Code: code, Files: map[string][]byte{"wheels/wbdemo-1.0-py3-none-any.whl": whl},
			Limits: Limits{Timeout: 60 * time.Second}})
		if strings.TrimSpace(res.Stdout) == "NO-PIP" {
			if os.Getenv("CI") == "true" {
				t.Fatal("the test image has no pip")
			}
			t.Skip("the test image has no pip")
		}
		if res.ExitCode != 0 || res.Stdout != "hello from wbdemo\n" {
			t.Fatalf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
		}
		if _, ok := res.Files["site/wbdemo/__init__.py"]; !ok {
			t.Errorf("installed package not among the changed files: %v", res.Changes)
		}
	})
}

// buildWheel writes a pure-Python wheel (a zip with a .dist-info: METADATA, WHEEL, RECORD).
func buildWheel(t *testing.T, name, version string, files map[string]string) []byte {
	t.Helper()
	info := name + "-" + version + ".dist-info/"
	all := map[string]string{}
	for k, v := range files {
		all[k] = v
	}
	all[info+"METADATA"] = "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n"
	all[info+"WHEEL"] = "Wheel-Version: 1.0\nGenerator: wasmbox-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
	var record strings.Builder
	for _, p := range sortedKeys(all) {
		sum := sha256.Sum256([]byte(all[p]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", p, base64.RawURLEncoding.EncodeToString(sum[:]), len(all[p]))
	}
	record.WriteString(info + "RECORD,,\n")
	all[info+"RECORD"] = record.String()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, p := range sortedKeys(all) {
		w, err := zw.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(all[p]))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestConcurrentRuns(t *testing.T) {
	forEachEngine(t, "runc", func(t *testing.T, d *Docker) {
		const n = 4
		type out struct {
			res *Result
			err error
		}
		results := make(chan out, n)
		for i := range n {
			go func() {
				res, err := d.Run(t.Context(), Job{Image: testImage(),
					Code: "import wasmbox_tools as t\nprint(t.call('id', n=" + fmt.Sprint(i) + "))\nopen('f', 'w').write('" + fmt.Sprint(i) + "')\n",
					Tools: func(ctx context.Context, tool string, args json.RawMessage) (json.RawMessage, error) {
						return args, nil
					}})
				results <- out{res, err}
			}()
		}
		seen := map[string]bool{}
		for range n {
			o := <-results
			if o.err != nil || o.res.ExitCode != 0 {
				t.Fatalf("%v %+v", o.err, o.res)
			}
			key := strings.TrimSpace(o.res.Stdout) + "/" + string(o.res.Files["f"])
			seen[key] = true
		}
		if len(seen) != n {
			t.Fatalf("runs mixed up: %v", seen)
		}
		assertNoContainers(t, d)
	})
}

func TestPruneRemovesLeftovers(t *testing.T) {
	forEachEngine(t, "runc", func(t *testing.T, d *Docker) {
		// A container as a process that died mid-run would leave it (created, never removed).
		c, err := d.cli.ContainerCreate(t.Context(), client.ContainerCreateOptions{Image: testImage(),
			Config: &container.Config{Cmd: []string{"true"}, Labels: map[string]string{LabelManaged: "1", "org.wasmbox.test": t.Name()}}})
		if err != nil {
			t.Fatal(err)
		}
		if n, err := d.Prune(t.Context(), time.Hour); err != nil || n != 0 {
			t.Fatalf("Prune(1h) removed %d: %v", n, err)
		}
		n, err := d.Prune(t.Context(), 0)
		if err != nil || n < 1 {
			t.Fatalf("Prune(0) removed %d: %v", n, err)
		}
		if _, err := d.cli.ContainerInspect(t.Context(), c.ID, client.ContainerInspectOptions{}); err == nil {
			t.Fatal("container still there")
		}
		assertNoContainers(t, d)
	})
}

// BenchmarkRun measures one trivial run (print(1)) end to end: image check, run directory, create, attach,
// start, wait, inspect, workspace transfer, remove.
func BenchmarkRun(b *testing.B) {
	hosts := engineHosts()
	if len(hosts) == 0 {
		b.Skip("no engine configured")
	}
	for _, h := range hosts {
		for _, rt := range []string{"runc", "runsc"} {
			b.Run(engineName(h)+"/"+rt, func(b *testing.B) {
				d, err := NewDocker(b.Context(), DockerConfig{Host: h, Runtime: rt})
				if err != nil {
					b.Skip(err)
				}
				defer d.Close()
				for b.Loop() {
					res, err := d.Run(b.Context(), Job{Image: testImage(), Code: "print(1)"})
					if err != nil || res.Stdout != "1\n" {
						b.Fatal(err, res)
					}
				}
			})
		}
	}
}
