package wheels

import (
	"fmt"
	"testing"
)

func TestWheelFilename(t *testing.T) {
	cases := []struct {
		file    string
		project string
		version string
		build   string
		kind    fileKind
	}{
		{"textfmt-1.0-py3-none-any.whl", "textfmt", "1.0", "", kindPure},
		{"Text_Fmt-2.0.post1-py2.py3-none-any.whl", "text-fmt", "2.0.post1", "", kindPure},
		{"textfmt-1.0-1-py3-none-any.whl", "textfmt", "1.0", "1", kindPure},
		{"textfmt-1.0-12abc-py3-none-any.whl", "textfmt", "1.0", "12abc", kindPure},
		{"textfmt-1.0-cp313-none-any.whl", "textfmt", "1.0", "", kindPure},
		{"textfmt-1.0-py313-none-any.whl", "textfmt", "1.0", "", kindPure},
		{"textfmt-1.0-py38-none-any.whl", "textfmt", "1.0", "", kindPure},
		{"textfmt-1.0-PY3-NONE-ANY.WHL", "textfmt", "1.0", "", kindPure},
		{"textfmt-1.0-py314-none-any.whl", "textfmt", "1.0", "", kindOtherPy},
		{"textfmt-1.0-cp312-none-any.whl", "textfmt", "1.0", "", kindOtherPy},
		{"textfmt-1.0-py2-none-any.whl", "textfmt", "1.0", "", kindOtherPy},
		{"textfmt-1.0-py303-none-any.whl", "textfmt", "1.0", "", kindOtherPy},
		{"numpy-2.1.0-cp313-cp313-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "numpy", "2.1.0", "", kindNative},
		{"attrs-1.0-cp313-abi3-any.whl", "attrs", "1.0", "", kindNative},
		{"attrs-1.0-py3-none-win_amd64.whl", "attrs", "1.0", "", kindNative},
	}
	for _, c := range cases {
		w, err := parseWheelFilename(c.file)
		if err != nil {
			t.Errorf("%s: %v", c.file, err)
			continue
		}
		build := ""
		if w.hasBuild {
			build = fmt.Sprintf("%d%s", w.buildNum, w.buildTag)
		}
		if w.project != c.project || w.version.String() != c.version || build != c.build || w.kind() != c.kind {
			t.Errorf("%s = %q %s build %q kind %d; want %q %s %q %d", c.file, w.project, w.version, build, w.kind(), c.project, c.version, c.build, c.kind)
		}
	}
	for _, bad := range []string{
		"textfmt-1.0-py3-none.whl", "textfmt-1.0-py3-none-any.zip", "textfmt-py3-none-any.whl", "-1.0-py3-none-any.whl",
		"textfmt-1.0-x1-py3-none-any.whl", "textfmt-bad-py3-none-any.whl", "textfmt-1.0-py3--any.whl",
		"textfmt-1.0-py3.-none-any.whl", "a-b-1.0-1-py3-none-any.whl", "textfmt-1.0-99999999999999999999999-py3-none-any.whl",
		"tex/tfmt-1.0-py3-none-any.whl",
	} {
		if _, err := parseWheelFilename(bad); err == nil {
			t.Errorf("parseWheelFilename(%q) succeeded", bad)
		}
	}
	a, _ := parseWheelFilename("x-1.0-py3-none-any.whl")
	b, _ := parseWheelFilename("x-1.0-2-py3-none-any.whl")
	c, _ := parseWheelFilename("x-1.0-10-py3-none-any.whl")
	if !a.buildLess(b) || !b.buildLess(c) || c.buildLess(b) {
		t.Error("build tag ordering: none < 2 < 10")
	}
}

func TestSdistFilename(t *testing.T) {
	for file, want := range map[string]string{
		"numpy-2.1.0.tar.gz": "numpy 2.1.0", "python-dateutil-2.9.0.tar.gz": "python-dateutil 2.9.0",
		"Foo_Bar-1.0rc1.zip": "foo-bar 1.0rc1", "README.txt": "", "x.tar.gz": "",
	} {
		p, v, ok := parseSdistFilename(file)
		got := ""
		if ok {
			got = p + " " + v.String()
		}
		if got != want {
			t.Errorf("parseSdistFilename(%q) = %q, want %q", file, got, want)
		}
	}
}
