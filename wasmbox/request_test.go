package wasmbox_test

import (
	"testing"

	"github.com/wasmbox/wasmbox/wasmbox"
)

// Every text of a run's request reaches the program as the host gave it: NUL, characters outside the BMP, empty
// strings, and bytes that are not UTF-8 (each replaced by U+FFFD, in the code too).
func TestRequestTextReachesTheProgram(t *testing.T) {
	sb := newSandbox(t, wasmbox.Config{Env: map[string]string{"K": "v\U0001F600", "EMPTY": "", "BAD": "a\xffb"}})
	res, err := sb.RunProgram(t.Context(), wasmbox.Program{
		Code:     "import sys, os\nprint(ascii(sys.argv))\nprint(ascii([os.environ[k] for k in ('K', 'EMPTY', 'BAD')]))\nprint(ascii(__file__), ascii('\xfe'))",
		Filename: "prog\u00e9.py",
		Args:     []string{"prog\u00e9.py", "", "a\x00b", "\xc3"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "['prog\\xe9.py', '', 'a\\x00b', '\\ufffd']\n" +
		"['v\\U0001f600', '', 'a\\ufffdb']\n" +
		"'prog\\xe9.py' '\\ufffd'\n"
	if res.Stdout != want {
		t.Fatalf("stdout %q\nwant   %q\nstderr %s", res.Stdout, want, res.Stderr)
	}
}
