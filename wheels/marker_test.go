package wheels

import (
	"slices"
	"testing"
)

func TestParseRequirement(t *testing.T) {
	cases := []struct {
		in     string
		norm   string
		extras []string
		spec   string
		url    string
		marker bool
	}{
		{"textfmt", "textfmt", nil, "", "", false},
		{"Text_Fmt>=1.0", "text-fmt", nil, ">=1.0", "", false},
		{"textfmt [Color, wide] (>=1.0,<2)", "textfmt", []string{"color", "wide"}, ">=1.0,<2", "", false},
		{"textfmt>=1; python_version < '3.8'", "textfmt", nil, ">=1", "", true},
		{"textfmt;extra=='x'", "textfmt", nil, "", "", true},
		{"textfmt @ https://example.com/t.whl ; sys_platform == 'wasi'", "textfmt", nil, "", "https://example.com/t.whl", true},
		{"a.b-c_d ~= 1.4", "a-b-c-d", nil, "~=1.4", "", false},
	}
	for _, c := range cases {
		r, err := parseRequirement(c.in)
		if err != nil {
			t.Errorf("parseRequirement(%q): %v", c.in, err)
			continue
		}
		if r.norm != c.norm || !slices.Equal(r.extras, c.extras) || r.spec.String() != c.spec || r.url != c.url || (r.marker != nil) != c.marker {
			t.Errorf("parseRequirement(%q) = %q %v %q %q %v", c.in, r.norm, r.extras, r.spec, r.url, r.marker != nil)
		}
	}
	for _, bad := range []string{"", ">=1", "-a", "a[", "a[b", "a (>=1", "a >= ", "a; ", "a; os_name", "a; foo == 'x'", "a; os_name == 'x' and", "a @ ", "a; (os_name == 'x'", "a; 'x' == 'y'"} {
		if _, err := parseRequirement(bad); err == nil {
			t.Errorf("parseRequirement(%q) succeeded", bad)
		}
	}
}

func TestMarkers(t *testing.T) {
	cases := []struct {
		marker string
		extras []string
		want   bool
	}{
		{`python_version < "3.8"`, nil, false},
		{`python_version >= "3.8"`, nil, true},
		{`python_version == "3.13"`, nil, true},
		{`python_version ~= "3.10"`, nil, true},
		{`python_full_version >= "3.13.1"`, nil, true},
		{`python_version > "3.13"`, nil, false},
		{`"3.8" <= python_version`, nil, true},
		{`python_version in "3.12 3.13"`, nil, true},
		{`python_version not in "3.12 3.13"`, nil, false},
		{`sys_platform == "win32"`, nil, false},
		{`sys_platform == "wasi"`, nil, true},
		{`sys_platform != "win32" and os_name == "posix"`, nil, true},
		{`platform_system == "Windows" or platform_system == "Darwin"`, nil, false},
		{`implementation_name == "cpython" and platform_python_implementation == 'CPython'`, nil, true},
		{`platform_machine == "x86_64"`, nil, false},
		{`(sys_platform == "win32" or python_version >= "3") and extra == "test"`, nil, false},
		{`(sys_platform == "win32" or python_version >= "3") and extra == "test"`, []string{"test"}, true},
		{`extra == "Color_Support"`, []string{"color-support"}, true},
		{`extra == "color"`, []string{"other"}, false},
		{`sys.platform == "wasi"`, nil, true},
		{`os.name == "nt"`, nil, false},
		{`platform_release >= "5"`, nil, false},
		{`"linux" in sys_platform`, nil, false},
	}
	for _, c := range cases {
		r, err := parseRequirement("x; " + c.marker)
		if err != nil {
			t.Errorf("%s: %v", c.marker, err)
			continue
		}
		got, err := r.applies(c.extras)
		if err != nil {
			t.Errorf("%s: %v", c.marker, err)
		} else if got != c.want {
			t.Errorf("%s with extras %v = %v, want %v", c.marker, c.extras, got, c.want)
		}
	}
}

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"Friendly-Bard": "friendly-bard", "FRIENDLY-BARD": "friendly-bard", "friendly.bard": "friendly-bard",
		"friendly_bard": "friendly-bard", "friendly--bard": "friendly-bard", "FrIeNdLy-._.-bArD": "friendly-bard",
	} {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMetadataHeaders(t *testing.T) {
	m, err := parseMetadata([]byte("Metadata-Version: 2.1\r\nName: demo\r\nVersion: 1.0\r\nSummary: a\r\n  folded\r\n" +
		"Requires-Dist: a>=1\r\nRequires-Dist: b; extra == 'x'\r\nRequires-Python: >=3.8\r\nProvides-Extra: X\r\n\r\n" +
		"Requires-Dist: not-a-header-this-is-the-body\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m.name != "demo" || m.version.String() != "1.0" || len(m.requires) != 2 || m.requiresPython.String() != ">=3.8" || !slices.Equal(m.extras, []string{"x"}) {
		t.Errorf("parsed %+v", m)
	}
	for _, bad := range []string{"Name: x\n", "Version: 1\n", "Name: x\nVersion: nope\n", "Name: x\nVersion: 1\nRequires-Dist: >=1\n",
		"Name: x\nVersion: 1\nRequires-Python: 3\n", "Name: x y\nVersion: 1\n", "Name: x\nVersion: 1\nSummary: \xff\n"} {
		if _, err := parseMetadata([]byte(bad)); err == nil {
			t.Errorf("parseMetadata(%q) succeeded", bad)
		}
	}
}
