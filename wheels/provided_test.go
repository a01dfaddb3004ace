package wheels

import (
	"slices"
	"testing"
)

// A runtime with numpy and pandas built in: a pure-Python wheel that needs numpy resolves against the built-in
// one, nothing of numpy is installed, and the built-in version is never replaced.
func TestResolveWithProvided(t *testing.T) {
	ws := []testWheel{
		{Name: "statlite", Version: "1.0", Requires: []string{"numpy>=1.22", "pandas", "wcwidthlite"}},
		{Name: "oldstat", Version: "1.0", Requires: []string{"numpy<2"}},
		{Name: "wcwidthlite", Version: "0.2.1"},
		{Name: "numpy", Version: "1.26.0"}, // a wheelhouse copy must never shadow the built-in one
	}
	// numpy and pandas are not on the allow-list: nothing of theirs is installed, so they need not be.
	wh := open(t, house(t, ws, nil), Options{Allow: []string{"statlite", "oldstat", "wcwidthlite"}})
	provided := Provided{"NumPy": "2.2.4", "pandas": "2.2.3"}

	p, err := wh.ResolveWith(bg, provided, "statlite")
	if err != nil {
		t.Fatal(err)
	}
	if got := planOf(p); !slices.Equal(got, []string{"wcwidthlite==0.2.1", "statlite==1.0"}) {
		t.Errorf("plan %v", got)
	}
	if got := p.Wheels()[1].Requires; !slices.Equal(got, []string{"wcwidthlite"}) {
		t.Errorf("statlite requires %v in the plan, want only what is installed", got)
	}
	prov := p.Provided()
	if len(prov) != 2 || prov[0].Project != "numpy" || prov[0].Name != "NumPy" || prov[0].Version != "2.2.4" || prov[1].Project != "pandas" {
		t.Errorf("Provided = %+v", prov)
	}
	layer := &MemLayer{}
	done, err := p.Install(bg, layer)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 4 || !done[0].BuiltIn || !done[1].BuiltIn || done[2].BuiltIn || done[2].Project != "wcwidthlite" || len(done[0].Files) != 0 {
		t.Errorf("Install = %+v", done)
	}
	if _, err := layer.Stat("numpy"); err == nil {
		t.Error("numpy was written into the layer")
	}

	// The request itself may name a built-in project, with or without a matching specifier.
	for _, req := range []string{"numpy", "numpy>=2", "numpy==2.2.4", "pandas[performance]"} {
		p, err := wh.ResolveWith(bg, provided, req)
		if err != nil || len(p.Wheels()) != 0 || len(p.Provided()) != 1 {
			t.Errorf("%s: plan %v provided %v err %v", req, planOf(p), p.Provided(), err)
		}
	}
	// Provided projects resolve on the zero (empty) Wheelhouse too; anything else is not there.
	if p, err := new(Wheelhouse).ResolveWith(bg, provided, "numpy", "pandas"); err != nil || len(p.Provided()) != 2 {
		t.Errorf("zero Wheelhouse: %v", err)
	}
	_, err = new(Wheelhouse).ResolveWith(bg, provided, "numpy", "statlite")
	wantErr(t, err, ErrNotAllowed, "statlite")

	// The built-in version is never replaced: a specifier it misses is a conflict that says why.
	_, err = wh.ResolveWith(bg, provided, "numpy<2")
	wantErr(t, err, ErrConflict, "numpy", "2.2.4", "built into the interpreter", "<2", "the request")
	_, err = wh.ResolveWith(bg, provided, "oldstat")
	wantErr(t, err, ErrConflict, "2.2.4", "oldstat 1.0", "<2")

	// Without provided projects the same wheelhouse behaves as before: numpy is not allowed.
	_, err = wh.ResolveAll(bg, "statlite")
	wantErr(t, err, ErrNotAllowed, "numpy")
	_, err = wh.ResolveWith(bg, Provided{"numpy": "not a version"}, "statlite")
	wantErr(t, err, ErrInvalid, "numpy", "not a version")
}
