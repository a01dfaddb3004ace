package main

import "testing"

func TestGlobMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, s string
		want       bool
	}{
		{"a/b.py::T::t[x-1]", "a/b.py::T::t[x-1]", true},
		{"a/b.py::T::t[x-1]", "a/b.py::T::t[x-2]", false},
		{"a/b.py::t[pyarrow*", "a/b.py::t[pyarrow-None]", true},
		{"a/b.py::t[pyarrow*", "a/b.py::t[python-None]", false},
		{"a/*::test_ctypes", "a/x.py::TestPCG64::test_ctypes", true},
		{"a/*::test_ctypes", "a/x.py::TestPCG64::test_ctypes2", false},
		{"*", "anything", true},
		{"a*b*c", "abc", true},
		{"a*b*c", "acb", false},
	} {
		if got := globMatch(c.pattern, c.s); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v", c.pattern, c.s, got)
		}
	}
}
