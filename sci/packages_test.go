package sci

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/wasmbox/wasmbox/agent"
	"github.com/wasmbox/wasmbox/agent/agenttest"
	"github.com/wasmbox/wasmbox/wasmbox"
	"github.com/wasmbox/wasmbox/wheels"
	"github.com/wasmbox/wasmbox/wheels/wheeltest"
)

// numpy and pandas are part of the runtime: asking to install them says so (no wheelhouse needed), a version
// they do not satisfy is a conflict, and a pure-Python wheel that needs them resolves against the built-in ones.
func TestBuiltinPackages(t *testing.T) {
	ctx := context.Background()
	sb := sharedSandbox(t)
	if got := sb.Info().BuiltIn; got["numpy"] != "2.2.4" || got["pandas"] != "2.2.3" {
		t.Fatalf("Info.BuiltIn %v", got)
	}
	se, err := sb.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer se.Close(ctx)
	done, err := se.InstallPackages(ctx, "numpy", "pandas>=2")
	if err != nil || len(done) != 2 || !done[0].BuiltIn || done[0].Project != "numpy" || done[1].Project != "pandas" {
		t.Fatalf("install numpy, pandas: %+v %v", done, err)
	}
	if _, err := se.InstallPackages(ctx, "numpy<2"); !errors.Is(err, wasmbox.ErrPackage) || !errors.Is(err, wheels.ErrConflict) || !strings.Contains(err.Error(), "built into the interpreter") {
		t.Fatalf("numpy<2: %v", err)
	}
	if _, err := se.InstallPackages(ctx, "tabulate"); !errors.Is(err, wasmbox.ErrPackage) || !strings.Contains(err.Error(), "no Wheelhouse") || !strings.Contains(err.Error(), "numpy 2.2.4") {
		t.Fatalf("tabulate without a wheelhouse: %v", err)
	}
	out, err := agent.SessionInstaller().InstallPackages(ctx, agent.InstallRequest{Packages: []string{"numpy"}, Session: se})
	if err != nil || !strings.Contains(out, "numpy 2.2.4 is built into this sandbox") || strings.Contains(out, "/packages") {
		t.Fatalf("install_package(numpy): %q %v", out, err)
	}

	dir := t.TempDir()
	w := wheeltest.Wheel{Name: "npstat", Version: "1.0", Requires: []string{"numpy>=1.22", "pandas>=2"},
		Files: map[string]string{"npstat/__init__.py": "import numpy as np\ndef mean(xs):\n    return float(np.mean(np.asarray(xs)))\n"}}
	if _, err := w.Write(dir); err != nil {
		t.Fatal(err)
	}
	wh, err := wheels.Open(dir, wheels.Options{Allow: []string{"npstat"}}) // numpy need not be allowed: nothing of it installs
	if err != nil {
		t.Fatal(err)
	}
	withWheels := newSandbox(t, wasmbox.Config{Wheelhouse: wh, Packages: []string{"npstat"}})
	if res := run(t, withWheels, "import npstat\nprint(npstat.mean([1, 2, 6]))"); res.Stdout != "3.0\n" {
		t.Fatalf("npstat: %q", res.Stdout)
	}

	a, err := agent.New(ctx, agenttest.New(nil), wasmbox.Config{Runtime: Name})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	if p := a.SystemPrompt(); !strings.Contains(p, "Built in, ready to import (never install them): numpy 2.2.4, pandas 2.2.3") || strings.Contains(p, "Python standard library only") {
		t.Fatalf("system prompt:\n%s", p)
	}

	// The Toolkit's install_package without an installer: built-in packages need none, anything else is
	// unavailable, and the answer names what the program can import (not "only the standard library").
	k, err := a.NewToolkit(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close(ctx)
	tool, _ := k.Tool("install_package")
	for _, tc := range []struct{ in, want, not string }{
		{`{"packages": ["numpy", "Pandas>=2"]}`, "numpy 2.2.4 is built into this sandbox: import it, no installation is needed\npandas 2.2.3 is built into this sandbox", "error"},
		{`{"packages": ["numpy<2"]}`, "error: ToolError: install_package is not available yet: escalation/wheelhouse not configured: ", "built into this sandbox:"},
		{`{"packages": ["numpy", "tabulate"]}`, "only the Python standard library and the built-in packages (numpy 2.2.4, pandas 2.2.3, ", "built into this sandbox:"},
	} {
		out, err := tool.Call(ctx, tc.in)
		if err != nil || !strings.Contains(out, tc.want) || strings.Contains(out, tc.not) {
			t.Errorf("install_package(%s) without an installer:\n got %q, %v\nwant it to contain %q", tc.in, out, err, tc.want)
		}
	}
}
