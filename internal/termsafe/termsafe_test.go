package termsafe

import "testing"

func TestClean(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain path/ok.txt", "plain path/ok.txt"},
		{"héllo wörld", "héllo wörld"},
		{"\x1b[2K\rwasmbox: forged", `\u001b[2K\u000dwasmbox: forged`},
		{"\x1b]0;title\x07", `\u001b]0;title\u0007`},
		{"\x1b]52;c;aGk=\x1b\\", `\u001b]52;c;aGk=\u001b\`},
		{"a\x1fb\x7fc", `a\u001fb\u007fc`},
		{"\u009b31m", `\u009b31m`},
		{"evil\u202etxt.exe", `evil\u202etxt.exe`},
		{"bad\xffbyte", `bad\xffbyte`},
		{"new\nline", `new\u000aline`},
	}
	for _, c := range cases {
		if got := Clean(c.in); got != c.want {
			t.Errorf("Clean(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestLines(t *testing.T) {
	in := "line one\r\n\tindented \x1b[31mred\nlast\x07"
	want := "line one\n\tindented \\u001b[31mred\nlast\\u0007"
	if got := Lines(in); got != want {
		t.Errorf("Lines(%q) = %q, want %q", in, got, want)
	}
}
