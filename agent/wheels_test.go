package agent_test

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmbox/wasmbox/agent"
	"github.com/wasmbox/wasmbox/agent/agenttest"
	"github.com/wasmbox/wasmbox/wasmbox"
	"github.com/wasmbox/wasmbox/wheels"
)

// pureWheel writes a one-module py3-none-any wheel.
func pureWheel(t *testing.T, dir, name, version, module, source string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%s-py3-none-any.whl", name, version)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zw := zip.NewWriter(f)
	info := name + "-" + version + ".dist-info"
	files := map[string]string{
		module + ".py":     source,
		info + "/METADATA": fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", name, version),
		info + "/WHEEL":    "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
	}
	var record strings.Builder
	for p, body := range files {
		w, _ := zw.Create(p)
		w.Write([]byte(body))
		sum := sha256.Sum256([]byte(body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", p, base64.RawURLEncoding.EncodeToString(sum[:]), len(body))
	}
	record.WriteString(info + "/RECORD,,\n")
	w, _ := zw.Create(info + "/RECORD")
	w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
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
