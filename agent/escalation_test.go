package agent_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/wasmbox/wasmbox/agent"
	"github.com/wasmbox/wasmbox/agent/agenttest"
	"github.com/wasmbox/wasmbox/escalate"
	"github.com/wasmbox/wasmbox/wasmbox"
	"github.com/wasmbox/wasmbox/wheels"
	"github.com/wasmbox/wasmbox/wheels/wheeltest"
)

// nativeWheel writes a one-module wheel tagged for CPython 3.11 on this machine's manylinux platform: "native"
// for the wasm sandbox (it needs an ABI and a platform), while pip in the test image (the host's python3.11,
// see .ci/escalation.sh) installs it. The module itself is pure Python.
func nativeWheel(t *testing.T, dir, name, version, module, source string) string {
	t.Helper()
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH]
	if arch == "" {
		arch = runtime.GOARCH
	}
	file, err := wheeltest.Wheel{Name: name, Version: version, Tag: "cp311-cp311-manylinux_2_17_" + arch,
		Files: map[string]string{module + ".py": source}}.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	return file
}

// escalationWheelhouse is a wheelhouse with a native-only package (nativepkg) and a pure one (shout).
func escalationWheelhouse(t *testing.T) (string, *wheels.Wheelhouse) {
	t.Helper()
	dir := t.TempDir()
	nativeWheel(t, dir, "nativepkg", "1.0", "nativepkg", "def hello():\n    return 'native hello'\n")
	pureWheel(t, dir, "shout", "1.0", "shout", "def shout(s):\n    return s.upper() + '!'\n")
	wh, err := wheels.Open(dir, wheels.Options{Allow: []string{"nativepkg", "shout"}})
	if err != nil {
		t.Fatal(err)
	}
	return dir, wh
}

// refusingBackend fails the test if anything tries to run a container.
type refusingBackend struct{ t *testing.T }

func (b refusingBackend) Run(ctx context.Context, job escalate.Job) (*escalate.Result, error) {
	b.t.Errorf("a container was started for %q although escalation must not happen", job.Image)
	return nil, errors.New("refusingBackend")
}
func (refusingBackend) Name() string { return "refusing" }
func (refusingBackend) Close() error { return nil }

const testEscalationImage = "wasmbox-test-python:latest"

// tryNative is a program that installs nativepkg and gives the result (or the error) as the answer.
var tryNative = py(`try:
    final_answer({"ok": install_package(packages=["nativepkg"])})
except tools.ToolError as e:
    final_answer({"error": str(e)})`)

// Without a policy (or with one that refuses) install_package does not escalate: it explains why, as an
// observation, and pure packages still install.
func TestEscalationNotAllowed(t *testing.T) {
	dir, wh := escalationWheelhouse(t)
	for _, tc := range []struct {
		name   string
		policy escalate.Policy
		want   string
	}{
		{"no policy", nil, "no escalation policy"},
		{"refused", escalate.AllowImages("some-other-image:1"), `image "` + testEscalationImage + `" is not in the allowed list`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := agenttest.New(t,
				py(`print(install_package(packages=["shout"]))`),
				tryNative,
			)
			a, _ := newAgentCfg(t, model, wasmbox.Config{Wheelhouse: wh}, agent.WithEscalation(agent.EscalationConfig{
				Backend: refusingBackend{t}, Policy: tc.policy, Image: testEscalationImage, WheelhouseDir: dir,
			}))
			if !strings.Contains(a.SystemPrompt(), "def run_in_container(") {
				t.Errorf("run_in_container is not in the system prompt:\n%s", a.SystemPrompt())
			}
			res, err := run(t, a, "Use nativepkg.")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(res.Steps[0].Stdout, "installed shout 1.0") {
				t.Errorf("pure package not installed: %q", res.Steps[0].Stdout)
			}
			ans, _ := res.Answer.(map[string]any)
			msg, _ := ans["error"].(string)
			for _, want := range []string{"nativepkg needs native code", "cannot run in a container either", "not allowed by policy", tc.want, "pure-Python alternative"} {
				if !strings.Contains(msg, want) {
					t.Errorf("explanation %q lacks %q", msg, want)
				}
			}
			if got := agent.EscalatedPackages(res.Workspace); len(got) != 0 {
				t.Errorf("escalated %v", got)
			}
		})
	}
}

// No backend (no engine): install_package fails closed with a clear error, and run_in_container is not offered.
func TestEscalationNoBackend(t *testing.T) {
	dir, wh := escalationWheelhouse(t)
	cfg := agent.EscalationConfig{Policy: escalate.AllowImages(testEscalationImage), Image: testEscalationImage, WheelhouseDir: dir}
	model := agenttest.New(t, tryNative)
	a, _ := newAgentCfg(t, model, wasmbox.Config{Wheelhouse: wh}, agent.WithEscalation(cfg))
	if strings.Contains(a.SystemPrompt(), "run_in_container") {
		t.Errorf("run_in_container offered without a backend")
	}
	res, err := run(t, a, "Use nativepkg.")
	if err != nil {
		t.Fatal(err)
	}
	ans, _ := res.Answer.(map[string]any)
	msg, _ := ans["error"].(string)
	for _, want := range []string{"nativepkg needs native code", "no container engine reachable", "no container backend is configured (escalation fails closed)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}

	// The Go error, as a host program using the installer directly sees it.
	ctx := context.Background()
	ws := wasmbox.NewWorkspace(0, 0)
	se, err := a.Sandbox().NewSession(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	defer se.Close(ctx)
	_, err = agent.EscalatingInstaller(cfg).InstallPackages(ctx, agent.InstallRequest{Packages: []string{"nativepkg"}, Workspace: ws, Session: se})
	if !errors.Is(err, escalate.ErrNoEngine) || !errors.Is(err, wheels.ErrNeedsNative) {
		t.Errorf("err = %v; want ErrNoEngine and ErrNeedsNative", err)
	}
	if got := agent.EscalatedPackages(ws); len(got) != 0 {
		t.Errorf("escalated %v", got)
	}
}

// The policy is asked again before every container run: a refusal is an error observation and nothing runs.
func TestEscalationRunRefusedByPolicy(t *testing.T) {
	noCode := escalate.PolicyFunc(func(_ context.Context, job escalate.Job) error {
		if job.Code != "" {
			return errors.New("no programs today")
		}
		return nil
	})
	model := agenttest.New(t, py(`try:
    run_in_container(code="print(1)")
except tools.ToolError as e:
    final_answer(str(e))`))
	a, _ := newAgent(t, model, agent.WithEscalation(agent.EscalationConfig{Backend: refusingBackend{t}, Policy: noCode, Image: testEscalationImage}))
	res, err := run(t, a, "Run in a container.")
	if err != nil {
		t.Fatal(err)
	}
	if msg := fmt.Sprint(res.Answer); !strings.Contains(msg, "not allowed") || !strings.Contains(msg, "no programs today") {
		t.Errorf("answer %q", msg)
	}
}

func TestWithEscalationNeedsImage(t *testing.T) {
	_, err := agent.New(context.Background(), agenttest.New(nil), wasmbox.Config{}, agent.WithEscalation(agent.EscalationConfig{}))
	if !errors.Is(err, agent.ErrInvalidOption) {
		t.Fatalf("err = %v; want ErrInvalidOption", err)
	}
}

// testEngine connects to the engine that .ci/escalation.sh started. Without one the test skips, except when
// CI=true, where it fails.
func testEngine(t *testing.T) (escalate.Backend, string) {
	t.Helper()
	host := os.Getenv("WASMBOX_DOCKER_HOST")
	if host == "" {
		host, _, _ = strings.Cut(os.Getenv("WASMBOX_DOCKER_HOSTS"), ",")
	}
	missing := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s (CI=true: the engine tests must run; start engines with .ci/escalation.sh)", msg)
		}
		t.Skipf("%s; start engines with: eval \"$(.ci/escalation.sh start)\"", msg)
	}
	if host == "" {
		missing("no engine configured (WASMBOX_DOCKER_HOST, WASMBOX_DOCKER_HOSTS)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, err := escalate.NewDocker(ctx, escalate.DockerConfig{Host: host, Labels: map[string]string{"org.wasmbox.test": t.Name()}})
	if errors.Is(err, escalate.ErrNoEngine) {
		missing("engine %s not reachable: %v", host, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	image := os.Getenv("WASMBOX_TEST_IMAGE")
	if image == "" {
		image = testEscalationImage
	}
	return d, image
}

// With a policy that allows it and a real engine, install_package escalates the native package, and
// run_in_container runs a program in a container where it is importable, with the workspace copied in and the
// files it writes copied back, and the agent's tools reachable through the Gate.
func TestEscalationInContainer(t *testing.T) {
	backend, image := testEngine(t)
	dir, wh := escalationWheelhouse(t)
	model := agenttest.New(t,
		py(`print(install_package(packages=["nativepkg"]))
try:
    import nativepkg
except ImportError:
    print("not importable in the sandbox")`),
		py(`r = run_in_container(code="""
import nativepkg, sys
import wasmbox_tools
n = int(open("data.txt").read())
with open("out/result.txt", "w") as f:
    f.write(nativepkg.hello() + " " + str(n * 2))
print(tools.list_orders())
print(sys.version_info[:2])
""")
print(r)
final_answer({"exit_code": r["exit_code"], "stdout": r["stdout"], "stderr": r["stderr"],
              "changed": [(c["path"], c["kind"]) for c in r["files_changed"]],
              "result": open("/workspace/out/result.txt").read()})`),
	)
	a, _ := newAgentCfg(t, model, wasmbox.Config{Wheelhouse: wh, Timeout: 2 * time.Minute}, agent.WithEscalation(agent.EscalationConfig{
		Backend: backend, Policy: escalate.AllowImages(image), Image: image, WheelhouseDir: dir,
	}))
	ws := wasmbox.NewWorkspace(0, 0)
	if err := ws.WriteFile("data.txt", []byte("21")); err != nil {
		t.Fatal(err)
	}
	if err := ws.WriteFile("out/.keep", nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := a.RunIn(ctx, ws, "Use nativepkg on data.txt.")
	if err != nil {
		for _, s := range res.Steps {
			t.Logf("step %d: stdout %q stderr %q observation %q", s.N, s.Stdout, s.Stderr, s.Observation)
		}
		t.Fatal(err)
	}
	first := res.Steps[0].Stdout
	for _, want := range []string{"nativepkg: not installed in this sandbox: it needs native code", "run_in_container(code=...)", "not importable in the sandbox"} {
		if !strings.Contains(first, want) {
			t.Errorf("first step stdout %q lacks %q", first, want)
		}
	}
	if got := agent.EscalatedPackages(ws); len(got) != 1 || got[0] != "nativepkg" {
		t.Errorf("EscalatedPackages = %v", got)
	}
	ans, _ := res.Answer.(map[string]any)
	if ans["exit_code"] != 0.0 {
		t.Fatalf("container run failed: %v", ans)
	}
	if ans["result"] != "native hello 42" {
		t.Errorf("result %v", ans["result"])
	}
	if got := fmt.Sprint(ans["changed"]); got != "[[out/result.txt created]]" {
		t.Errorf("files_changed %s (the wheels and the agent's private files must not show up)", got)
	}
	if out, _ := ans["stdout"].(string); !strings.Contains(out, "A-1001") || !strings.Contains(out, "(3, 11)") {
		t.Errorf("container stdout %q: want the orders from the tool and Python 3.11", out)
	}
	if b, err := ws.ReadFile("out/result.txt"); err != nil || string(b) != "native hello 42" {
		t.Errorf("workspace out/result.txt = %q, %v", b, err)
	}
	var sawRun bool
	for _, c := range res.ToolCalls {
		if c.Tool == "run_in_container" {
			sawRun = c.Status == "ok"
		}
	}
	if !sawRun {
		t.Errorf("no successful run_in_container call in %+v", res.ToolCalls)
	}
}

// A failing container program comes back as a result with its traceback (its own source lines), and so does
// one that does not compile.
func TestEscalationContainerFailure(t *testing.T) {
	backend, image := testEngine(t)
	model := agenttest.New(t,
		py(`r = run_in_container(code="x = 1\nraise ValueError('boom %d' % x)\n")
s = run_in_container(code="print(1)\ndef f(:\n")
final_answer({"exit_code": r["exit_code"], "stderr": r["stderr"], "syntax": [s["exit_code"], s["stdout"], s["stderr"]]})`),
	)
	a, _ := newAgentCfg(t, model, wasmbox.Config{Timeout: 2 * time.Minute}, agent.WithEscalation(agent.EscalationConfig{
		Backend: backend, Policy: escalate.AllowImages(image), Image: image,
	}))
	res, err := run(t, a, "Fail in a container.")
	if err != nil {
		t.Fatal(err)
	}
	ans, _ := res.Answer.(map[string]any)
	stderr, _ := ans["stderr"].(string)
	if ans["exit_code"] != 1.0 || !strings.Contains(stderr, "ValueError: boom 1") || !strings.Contains(stderr, "raise ValueError('boom %d' % x)") {
		t.Errorf("answer %v", ans)
	}
	if strings.Contains(stderr, "main.py") {
		t.Errorf("the wrapper's frame shows in the traceback: %q", stderr)
	}
	syn, _ := ans["syntax"].([]any)
	if len(syn) != 3 || syn[0] != 1.0 || syn[1] != "" || !strings.Contains(fmt.Sprint(syn[2]), "SyntaxError") {
		t.Errorf("syntax error run: %v", syn)
	}
}

func TestToolkitRefusesEscalation(t *testing.T) {
	sb, err := wasmbox.New(context.Background(), wasmbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	gate, _ := wasmbox.DefaultGate()
	_, err = agent.NewToolkit(context.Background(), sb, gate, nil, agent.WithEscalation(agent.EscalationConfig{Image: "x", Backend: unusedBackend{}}))
	if !errors.Is(err, agent.ErrInvalidOption) {
		t.Fatalf("err = %v; want ErrInvalidOption", err)
	}
}

// unusedBackend only makes an EscalationConfig complete; nothing may run on it.
type unusedBackend struct{}

func (unusedBackend) Run(context.Context, escalate.Job) (*escalate.Result, error) {
	panic("unusedBackend.Run called")
}
func (unusedBackend) Name() string { return "unused" }
func (unusedBackend) Close() error { return nil }
