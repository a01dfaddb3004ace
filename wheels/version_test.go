package wheels

import (
	"slices"
	"testing"
)

func TestVersionNormalisation(t *testing.T) {
	for in, want := range map[string]string{
		"1.0":              "1.0",
		"v1.0":             "1.0",
		" 1.0 ":            "1.0",
		"1.0.0":            "1.0.0",
		"1!2.0":            "1!2.0",
		"1.0alpha1":        "1.0a1",
		"1.0-beta.2":       "1.0b2",
		"1.0c1":            "1.0rc1",
		"1.0pre3":          "1.0rc3",
		"1.0preview3":      "1.0rc3",
		"1.0a":             "1.0a0",
		"1.0-1":            "1.0.post1",
		"1.0rev2":          "1.0.post2",
		"1.0.r":            "1.0.post0",
		"1.0_post_3":       "1.0.post3",
		"1.0dev":           "1.0.dev0",
		"1.0-dev4":         "1.0.dev4",
		"1.0a1.post2.dev3": "1.0a1.post2.dev3",
		"1.0+Ubuntu-1":     "1.0+ubuntu.1",
		"1.0+abc_007":      "1.0+abc.7",
		"01.002":           "1.2",
	} {
		v, err := parseVersion(in)
		if err != nil {
			t.Errorf("parseVersion(%q): %v", in, err)
			continue
		}
		if v.String() != want {
			t.Errorf("parseVersion(%q) = %s, want %s", in, v, want)
		}
	}
	for _, bad := range []string{"", "a", "1.0.", "1..0", "1.0+", "1.0+a..b", "1.0-", "1.0 1", "1.0foo", "99999999999999999999999", "1.0+" + string(rune(0))} {
		if _, err := parseVersion(bad); err == nil {
			t.Errorf("parseVersion(%q) succeeded", bad)
		}
	}
}

func TestVersionOrdering(t *testing.T) {
	// PEP 440's own example ordering, plus epochs and locals.
	ordered := []string{
		"1.0.dev456", "1.0a1", "1.0a2.dev456", "1.0a12.dev456", "1.0a12",
		"1.0b1.dev456", "1.0b2", "1.0b2.post345.dev456", "1.0b2.post345",
		"1.0rc1.dev456", "1.0rc1", "1.0", "1.0+abc.5", "1.0+abc.7", "1.0+5", "1.0.post456.dev34",
		"1.0.post456", "1.0.15", "1.1.dev1", "1.1", "2", "10.0", "1!0.1",
	}
	for i := range ordered {
		for j := range ordered {
			a, _ := parseVersion(ordered[i])
			b, _ := parseVersion(ordered[j])
			if got, want := compareVersions(a, b), cmpInt(i, j); got != want {
				t.Errorf("compare(%s, %s) = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
	for _, eq := range [][2]string{{"1.0", "1.0.0"}, {"1.0", "1"}, {"0!1.0", "1.0"}, {"1.0a", "1.0a0"}, {"1.0+ABC", "1.0+abc"}} {
		a, _ := parseVersion(eq[0])
		b, _ := parseVersion(eq[1])
		if compareVersions(a, b) != 0 {
			t.Errorf("%s != %s", eq[0], eq[1])
		}
	}
}

func TestSpecifiers(t *testing.T) {
	cases := []struct {
		spec    string
		match   []string
		nomatch []string
	}{
		{"", []string{"0.1", "1.0a1", "9!9"}, nil},
		{"==1.2.3", []string{"1.2.3", "1.2.3.0", "1.2.3+local"}, []string{"1.2.4", "1.2.3a1", "1.2.3.post1", "1.2"}},
		{"==1.2.3+local", []string{"1.2.3+local"}, []string{"1.2.3", "1.2.3+other"}},
		{"==1.2.*", []string{"1.2", "1.2.0", "1.2.9", "1.2.9.post1", "1.2rc1", "1.2.0.dev1"}, []string{"1.3", "1.20", "1.1.9", "1!1.2"}},
		{"==1.*", []string{"1", "1.0", "1.99"}, []string{"2.0", "0.9"}},
		{"!=1.3", []string{"1.2", "1.3.1", "1.3.post1"}, []string{"1.3", "1.3.0", "1.3+local"}},
		{"!=1.3.*", []string{"1.2", "1.4"}, []string{"1.3", "1.3.5"}},
		{">=1,<2", []string{"1", "1.0", "1.9.9", "1.5.post1"}, []string{"0.9", "2", "2.0", "2.0.dev1", "2.0a1"}},
		{"<2", []string{"1.9", "1.9a1"}, []string{"2", "2.0rc1", "2.0.dev1"}},
		{"<2.0rc1", []string{"2.0b1", "1.0"}, []string{"2.0rc1", "2.0"}},
		{"<=2", []string{"2.0", "2.0+local", "1"}, []string{"2.0.post1", "2.1"}},
		{">1.7", []string{"1.7.1", "1.8"}, []string{"1.7", "1.7.post1", "1.7+local", "1.6"}},
		{">1.7.post2", []string{"1.7.post3", "1.8"}, []string{"1.7.post2", "1.7.post1"}},
		{">=1.7", []string{"1.7", "1.7.post1", "1.7+local", "2"}, []string{"1.7rc1", "1.6"}},
		{"~=1.4", []string{"1.4", "1.4.5", "1.9"}, []string{"1.3", "2.0", "2.0a1"}},
		{"~=1.4.5", []string{"1.4.5", "1.4.9"}, []string{"1.5", "1.4.4"}},
		{"~=2.2.post3", []string{"2.2.post3", "2.3"}, []string{"2.2", "3.0"}},
		{"~=1.4.5a4", []string{"1.4.5a4", "1.4.5", "1.4.6"}, []string{"1.4.5a3", "1.5"}},
		{"===1.0+x", []string{"1.0+X"}, []string{"1.0"}},
		{" >= 1.0 , != 1.5 ", []string{"1.0", "1.4", "1.6"}, []string{"1.5", "0.9"}},
	}
	for _, c := range cases {
		s, err := parseSpecifier(c.spec)
		if err != nil {
			t.Errorf("parseSpecifier(%q): %v", c.spec, err)
			continue
		}
		for _, vs := range c.match {
			v, err := parseVersion(vs)
			if err != nil {
				t.Fatal(err)
			}
			if !s.contains(v) {
				t.Errorf("%q does not match %s", c.spec, vs)
			}
		}
		for _, vs := range c.nomatch {
			v, err := parseVersion(vs)
			if err != nil {
				t.Fatal(err)
			}
			if s.contains(v) {
				t.Errorf("%q matches %s", c.spec, vs)
			}
		}
	}
	for _, bad := range []string{"1.0", "=1.0", "==", ">=1.0.*", "~=1", "~=1.*", ">=1.0+local", "==1.0a1.*", ">=1,", "==1.0 2", "=>1"} {
		if _, err := parseSpecifier(bad); err == nil {
			t.Errorf("parseSpecifier(%q) succeeded", bad)
		}
	}
}

func TestPrereleaseFilter(t *testing.T) {
	mk := func(vs ...string) []*dist {
		var out []*dist
		for _, s := range vs {
			v, _ := parseVersion(s)
			out = append(out, &dist{version: v})
		}
		return out
	}
	names := func(ds []*dist) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.version.String())
		}
		return out
	}
	if got := names(filterPre(mk("1.0", "2.0a1"), false)); !slices.Equal(got, []string{"1.0"}) {
		t.Errorf("finals available: %v", got)
	}
	if got := names(filterPre(mk("2.0a1", "2.0b1"), false)); len(got) != 2 {
		t.Errorf("only pre-releases: %v", got)
	}
	if got := names(filterPre(mk("1.0", "2.0a1"), true)); len(got) != 2 {
		t.Errorf("pre-releases allowed: %v", got)
	}
	s, _ := parseSpecifier(">=2.0a1")
	if !s.allowsPrereleases() {
		t.Error(">=2.0a1 should allow pre-releases")
	}
	s, _ = parseSpecifier("!=2.0a1")
	if s.allowsPrereleases() {
		t.Error("!=2.0a1 should not allow pre-releases")
	}
}
