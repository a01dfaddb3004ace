package agent_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/wasmbox/wasmbox/agent"
	"github.com/wasmbox/wasmbox/agent/agenttest"
	"github.com/wasmbox/wasmbox/wasmbox"
	"github.com/wasmbox/wasmbox/wheels"
	"github.com/wasmbox/wasmbox/wheels/wheeltest"
)

// pureWheel writes a one-module py3-none-any wheel.
func pureWheel(t *testing.T, dir, name, version, module, source string) {
	t.Helper()
	if _, err := (wheeltest.Wheel{Name: name, Version: version, Files: map[string]string{module + ".py": source}}).Write(dir); err != nil {
		t.Fatal(err)
	}
}

// The code-action agent installs a pure-Python package from the wheelhouse in the middle of a program and uses
// it right away; a package outside the allow-list becomes an observation.
func TestSessionInstallerFromWheelhouse(t *testing.T) {
	dir := t.TempDir()
	pureWheel(t, dir, "shout", "1.0", "shout", "def shout(s):\n    return s.upper() + '!'\n")
	pureWheel(t, dir, "secretlib", "1.0", "secretlib", "X = 1\n")
	wh, err := wheels.Open(dir, wheels.Options{Allow: []string{"shout"}})
	if err != nil {
		t.Fatal(err)
	}
	model := agenttest.New(t,
		py("print(install_package(packages=['shout']))\nimport shout\nprint(shout.shout('hi'))"),
		py("try:\n    install_package(packages=['secretlib'])\nexcept tools.ToolError as e:\n    final_answer(['refused', 'allow-list' in str(e)])"),
	)
	a, _ := newAgentCfg(t, model, wasmbox.Config{Wheelhouse: wh}, agent.WithPackageInstaller(agent.SessionInstaller()))
	res, err := run(t, a, "Shout hi, then try secretlib.")
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Steps[0].Stdout; !strings.Contains(got, "installed shout 1.0") || !strings.Contains(got, "HI!") {
		t.Errorf("first step stdout %q", got)
	}
	if fmt.Sprint(res.Answer) != "[refused true]" {
		t.Errorf("answer %v", res.Answer)
	}
}
