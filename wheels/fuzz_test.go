package wheels

import (
	"crypto/sha256"
	"testing"
)

// The parsers face file names and wheel contents from the wheelhouse and requirement strings from the model:
// none may panic, whatever the input.

func FuzzWheelFilename(f *testing.F) {
	for _, s := range []string{
		"textfmt-1.0-py3-none-any.whl", "Text_Fmt-2.0.post1-1abc-py2.py3-none-any.whl",
		"numpy-2.1.0-cp313-cp313-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "x-1!2.0rc1.dev3+local.7-py313-none-any.WHL",
		"a--.whl", "-----.whl", "x-1.0-99999999999999999999-py3-none-any.whl", "x-1.0-py3-none-any.tar.gz",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		w, err := parseWheelFilename(name)
		if err == nil {
			_ = w.kind()
			_ = w.version.String()
			if Normalize(w.project) != w.project {
				t.Errorf("%q: project %q not normalised", name, w.project)
			}
		}
		parseSdistFilename(name)
		if v, err := parseVersion(name); err == nil {
			// Normalisation is stable and preserves equality.
			v2, err := parseVersion(v.String())
			if err != nil || compareVersions(v, v2) != 0 || v2.String() != v.String() {
				t.Errorf("%q: %s does not round-trip (%v)", name, v, err)
			}
		}
		if s, err := parseSpecifier(name); err == nil {
			v, _ := parseVersion("1.0")
			s.contains(v)
			s.allowsPrereleases()
			_ = s.String()
		}
	})
}

func FuzzMetadata(f *testing.F) {
	f.Add([]byte("Metadata-Version: 2.1\nName: textfmt\nVersion: 2.0\nRequires-Dist: wcwidthlite>=0.2\n" +
		"Requires-Dist: colorlite; extra == 'color' and (python_version >= '3.8' or sys_platform not in 'win32')\n" +
		"Requires-Python: >=3.8\nProvides-Extra: color\n\nbody\n"))
	f.Add([]byte("Name: x\nVersion: 1\nRequires-Dist: y @ https://x ; os_name == 'posix'\n"))
	f.Add([]byte("Name: x\nVersion: 1\nRequires-Dist: y; ((((os_name == 'posix'))))\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseMetadata(data)
		if err != nil {
			return
		}
		for _, r := range m.requires {
			_, _ = r.applies([]string{"color", "test"})
		}
		m.requiresPython.contains(pythonVersion)
	})
}

func FuzzRequirement(f *testing.F) {
	for _, s := range []string{
		"textfmt[color]>=1,<2; python_version < '3.8' or extra == 'x'", "a (==1.*)", "a @ file:///x ; os_name=='nt'",
		"a; platform_release >= '5' and 'x' in sys_platform", "a;(((", "a; extra not in 'x y'",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if r, err := parseRequirement(s); err == nil {
			_, _ = r.applies([]string{"x"})
		}
	})
}

// FuzzUnpack feeds arbitrary bytes to the wheel verifier, seeded with valid and broken wheels.
func FuzzUnpack(f *testing.F) {
	f.Add(testWheel{Name: "seed", Version: "1.0", Requires: []string{"dep; extra == 'x'"}}.bytes())
	f.Add(testWheel{Name: "seed", Version: "1.0", Files: map[string]string{"seed-1.0.data/purelib/a.py": "", "seed-1.0.data/scripts/s": ""}}.bytes())
	f.Add(testWheel{Name: "seed", Version: "1.0", Files: map[string]string{"../x": ""}}.bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		u, err := unpack(data, DefaultMaxUnpackedSize)
		if err != nil {
			return
		}
		for _, file := range u.files {
			if err := checkPath(file.path); err != nil {
				t.Errorf("unpack accepted %q: %v", file.path, err)
			}
		}
		_ = sha256.Sum256(data)
	})
}
