package wheels

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
)

// Wheel is one wheel of a Plan.
type Wheel struct {
	Project  string   // normalised project name (PEP 503)
	Name     string   // the name as METADATA spells it
	Version  string   // the version as METADATA spells it
	File     string   // the file name in the wheelhouse
	SHA256   string   // of the file, in hex
	Requires []string // the projects of the plan it depends on, normalised and sorted
}

// Plan is a resolved set of wheels, ready to install into any number of layers. It is immutable and safe for
// concurrent use.
type Plan struct {
	wheels   []planned
	provided []Wheel
	cycles   [][]string
}

// Provided names projects the interpreter already has built in (the sci runtime's numpy and pandas), by project
// name and version: ResolveWith satisfies requirements on them without installing anything.
type Provided map[string]string

type planned struct {
	info Wheel
	u    *unpacked
}

// Wheels returns the wheels to install, dependencies before the projects that need them (members of a dependency
// cycle in name order).
func (p *Plan) Wheels() []Wheel {
	out := make([]Wheel, len(p.wheels))
	for i, w := range p.wheels {
		out[i] = w.info
		out[i].Requires = slices.Clone(w.info.Requires)
	}
	return out
}

// Provided returns the built-in projects (ResolveWith's provided) that the request or a dependency asked for,
// in name order; File and SHA256 are empty, since nothing of theirs is installed.
func (p *Plan) Provided() []Wheel { return slices.Clone(p.provided) }

// Cycles returns the dependency cycles found, each a sorted list of the projects that require each other (a
// project requiring its own extras is not a cycle). Python packaging allows cycles and so does Resolve: they only affect the order of Wheels.
func (p *Plan) Cycles() [][]string {
	out := make([][]string, len(p.cycles))
	for i, c := range p.cycles {
		out[i] = slices.Clone(c)
	}
	return out
}

// Resolve chooses the wheels that install project name, restricted by the PEP 440 version specifier spec ("" for
// any version, "==1.2.3", ">=1,<2", "~=1.4", "!=1.3", "==1.*"), and its dependencies (Requires-Dist, with
// environment markers evaluated for CPython 3.13 on wasi), all from the wheelhouse.
//
// name is a project name, optionally with extras ("textfmt[wide]") and a specifier ("textfmt>=2", combined with
// spec), i.e. a PEP 508 requirement without a marker or URL.
//
// Resolution picks the highest version that satisfies every constraint seen so far (pre-releases only if a
// constraint names one or nothing else matches), skips wheels whose Requires-Python excludes 3.13, and walks the
// dependencies breadth first. It does not backtrack: a later constraint that the version already chosen does not
// satisfy is an ErrConflict naming every constraint (pin a version to get out of it). Dependency cycles are
// allowed.
//
// # Errors
//
// ErrInvalid (name or spec does not parse), ErrNotAllowed (a project of the closure is not on Options.Allow),
// ErrNotFound (no file, or no installable version matches: the message lists the versions there are),
// ErrNeedsNative (only platform-specific wheels or sdists match: *Error.Files names them), ErrConflict,
// ErrBadWheel and ErrHashMismatch (for the wheels it had to read), and the context's error.
func (wh *Wheelhouse) Resolve(ctx context.Context, name, spec string) (*Plan, error) {
	req, err := parseRoot(name)
	if err != nil {
		return nil, err
	}
	s, err := parseSpecifier(spec)
	if err != nil {
		return nil, newErr(ErrInvalid, req.norm, err.Error())
	}
	req.spec = append(req.spec, s...)
	return wh.resolve(ctx, []requirement{req})
}

// ResolveAll is Resolve for several requirements at once ("textfmt>=2", "attrs==23.2.0"), resolved together so
// that they share one consistent set of dependencies.
func (wh *Wheelhouse) ResolveAll(ctx context.Context, requirements ...string) (*Plan, error) {
	reqs, err := parseRoots(requirements)
	if err != nil {
		return nil, err
	}
	return wh.resolve(ctx, reqs)
}

func parseRoots(requirements []string) ([]requirement, error) {
	var reqs []requirement
	for _, r := range requirements {
		req, err := parseRoot(r)
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, req)
	}
	if len(reqs) == 0 {
		return nil, newErr(ErrInvalid, "", "no requirement given")
	}
	return reqs, nil
}

// ResolveWith is ResolveAll with projects the interpreter already provides. A requirement on a provided project
// (the request's, or a dependency's: a pure-Python wheel that needs numpy on a runtime that has numpy) is
// satisfied by the built-in version, which is never replaced: a version specifier it does not match is an
// ErrConflict that says so. Provided projects need not be on Options.Allow, since nothing of theirs is
// installed, and their own dependencies and extras count as provided with them. A request of provided projects
// only resolves even on an empty wheelhouse (the zero Wheelhouse). Names in provided are compared normalised;
// a version that does not parse as PEP 440 is an ErrInvalid.
func (wh *Wheelhouse) ResolveWith(ctx context.Context, provided Provided, requirements ...string) (*Plan, error) {
	reqs, err := parseRoots(requirements)
	if err != nil {
		return nil, err
	}
	pv := make(map[string]providedVersion, len(provided))
	for name, v := range provided {
		parsed, err := parseVersion(v)
		if err != nil {
			return nil, newErr(ErrInvalid, Normalize(name), fmt.Sprintf("provided version %q: %v", v, err))
		}
		pv[Normalize(name)] = providedVersion{name: name, v: parsed}
	}
	return wh.resolveWith(ctx, reqs, pv)
}

type providedVersion struct {
	name string
	v    version
}

func parseRoot(s string) (requirement, error) {
	req, err := parseRequirement(s)
	if err != nil {
		return requirement{}, newErr(ErrInvalid, "", err.Error())
	}
	if req.url != "" || req.marker != nil {
		return requirement{}, newErr(ErrInvalid, req.norm, fmt.Sprintf("%q: only a name, extras and a version specifier can be requested", req.raw))
	}
	return req, nil
}

type constraint struct {
	spec specifier
	from string // "the request" or "textfmt 2.0"
}

type node struct {
	d      *dist
	u      *unpacked
	deps   map[string]bool
	extras []string
}

type pending struct {
	req  requirement
	from string // "" for the request, else the project that requires it
	root bool   // a requirement of the request, whose constraint is already recorded
}

type resolver struct {
	ctx      context.Context
	wh       *Wheelhouse
	chosen   map[string]*node
	cons     map[string][]constraint
	queue    []pending
	provided map[string]providedVersion
	used     map[string]bool // provided projects asked for
}

func (wh *Wheelhouse) resolve(ctx context.Context, roots []requirement) (*Plan, error) {
	return wh.resolveWith(ctx, roots, nil)
}

func (wh *Wheelhouse) resolveWith(ctx context.Context, roots []requirement, provided map[string]providedVersion) (*Plan, error) {
	r := &resolver{ctx: ctx, wh: wh, chosen: map[string]*node{}, cons: map[string][]constraint{}, provided: provided, used: map[string]bool{}}
	// Constraints of the request all count before anything is chosen.
	for _, req := range roots {
		r.cons[req.norm] = append(r.cons[req.norm], constraint{req.spec, "the request"})
	}
	for _, req := range roots {
		req.spec = nil // already recorded
		r.queue = append(r.queue, pending{req: req, root: true})
	}
	for len(r.queue) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p := r.queue[0]
		r.queue = r.queue[1:]
		if err := r.step(p); err != nil {
			return nil, err
		}
	}
	return r.plan(), nil
}

func (r *resolver) describe(project string) string {
	if n := r.chosen[project]; n != nil {
		return n.u.meta.name + " " + n.u.meta.version.raw
	}
	return project
}

func (r *resolver) step(p pending) error {
	name := p.req.norm
	from := "the request"
	if p.from != "" {
		from = r.describe(p.from)
	}
	if pv, ok := r.provided[name]; ok {
		if len(p.req.spec) > 0 && !p.req.spec.contains(pv.v) || p.root && !r.matchesAll(name, pv.v) {
			spec := p.req.spec.String()
			if p.root {
				spec = r.specText(name)
			}
			return newErr(ErrConflict, name, fmt.Sprintf("%s %s is built into the interpreter and cannot be replaced, and %s requires %s", pv.name, pv.v.raw, from, spec))
		}
		r.used[name] = true
		return nil
	}
	if p.from != "" && p.from != name { // "pkg[all]" requiring "pkg[cli]" is not a cycle
		r.chosen[p.from].deps[name] = true
	}
	if !r.wh.allowed(name) {
		msg := "not on the policy's allow-list (Options.Allow)"
		if p.from != "" {
			msg = "required by " + from + ", and " + msg
		}
		return newErr(ErrNotAllowed, name, msg)
	}
	if p.req.url != "" {
		return newErr(ErrNotFound, name, fmt.Sprintf("%s requires it from a URL (%s), which a wheelhouse cannot provide", from, p.req.url))
	}
	c := constraint{p.req.spec, from}
	if !p.root && !slices.ContainsFunc(r.cons[name], func(o constraint) bool { return o.from == c.from && o.spec.String() == c.spec.String() }) {
		r.cons[name] = append(r.cons[name], c)
	}
	n := r.chosen[name]
	if n == nil {
		d, u, err := r.pick(name)
		if err != nil {
			return err
		}
		n = &node{d: d, u: u, deps: map[string]bool{}}
		r.chosen[name] = n
		return r.addExtras(name, n, p.req.extras, true)
	}
	if len(p.req.spec) > 0 && !p.req.spec.contains(n.d.version) {
		return r.conflict(name, n)
	}
	return r.addExtras(name, n, p.req.extras, false)
}

// addExtras queues the dependencies of n that apply with its extras; when only new extras arrive, the ones that
// apply now (re-queuing a dependency is harmless).
func (r *resolver) addExtras(name string, n *node, extras []string, first bool) error {
	grew := false
	for _, e := range extras {
		if !slices.Contains(n.extras, e) {
			n.extras = append(n.extras, e)
			grew = true
		}
	}
	if !first && !grew {
		return nil
	}
	for _, dep := range n.u.meta.requires {
		ok, err := dep.applies(n.extras)
		if err != nil {
			return &Error{Kind: ErrBadWheel, Project: name, Files: []string{n.d.file},
				Msg: fmt.Sprintf("%s: Requires-Dist %q", n.d.file, dep.raw), Err: err}
		}
		if ok {
			r.queue = append(r.queue, pending{req: dep, from: name})
		}
	}
	return nil
}

func (r *resolver) matchesAll(name string, v version) bool {
	for _, c := range r.cons[name] {
		if !c.spec.contains(v) {
			return false
		}
	}
	return true
}

func (r *resolver) constraintText(name string) string {
	var parts []string
	for _, c := range r.cons[name] {
		if len(c.spec) == 0 {
			parts = append(parts, fmt.Sprintf("%s requires any version", c.from))
		} else {
			parts = append(parts, fmt.Sprintf("%s requires %s", c.from, c.spec))
		}
	}
	return strings.Join(parts, ", ")
}

func (r *resolver) specText(name string) string {
	var parts []string
	for _, c := range r.cons[name] {
		if len(c.spec) > 0 {
			parts = append(parts, c.spec.String())
		}
	}
	return strings.Join(parts, ",")
}

func (r *resolver) conflict(name string, n *node) error {
	msg := fmt.Sprintf("%s; %s was chosen first and resolution does not backtrack", r.constraintText(name), n.d.version.raw)
	var ok []string
	for _, d := range r.wh.projects[name] {
		if d.kind == kindPure && r.matchesAll(name, d.version) && !slices.Contains(ok, d.version.raw) {
			ok = append(ok, d.version.raw)
		}
	}
	if len(ok) > 0 {
		msg += fmt.Sprintf(" (%s would satisfy all: request it explicitly)", strings.Join(ok, ", "))
	} else {
		msg += " (no version in the wheelhouse satisfies all of them)"
	}
	return newErr(ErrConflict, name, msg)
}

// allowsPre reports whether a constraint on name names a pre-release.
func (r *resolver) allowsPre(name string) bool {
	for _, c := range r.cons[name] {
		if c.spec.allowsPrereleases() {
			return true
		}
	}
	return false
}

// filterPre applies PEP 440's pre-release rule: pre-releases only if a constraint names one or no final release
// matches.
func filterPre(ds []*dist, allowPre bool) []*dist {
	if allowPre || !slices.ContainsFunc(ds, func(d *dist) bool { return !d.version.isPrerelease() }) {
		return ds
	}
	return slices.DeleteFunc(ds, func(d *dist) bool { return d.version.isPrerelease() })
}

func versionList(ds []*dist) string {
	var vs []version
	for _, d := range ds {
		if !slices.ContainsFunc(vs, func(v version) bool { return compareVersions(v, d.version) == 0 }) {
			vs = append(vs, d.version)
		}
	}
	slices.SortFunc(vs, compareVersions)
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.raw
	}
	return strings.Join(parts, ", ")
}

func fileList(ds []*dist) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.file
	}
	slices.Sort(out)
	return out
}

// pick chooses the highest installable version of name that satisfies its constraints.
func (r *resolver) pick(name string) (*dist, *unpacked, error) {
	all := r.wh.projects[name]
	if len(all) == 0 {
		return nil, nil, newErr(ErrNotFound, name, "the wheelhouse has no files for this project")
	}
	var pure, native, otherPy []*dist
	for _, d := range all {
		switch d.kind {
		case kindPure:
			pure = append(pure, d)
		case kindNative, kindSdist:
			native = append(native, d)
		case kindOtherPy:
			otherPy = append(otherPy, d)
		}
	}
	match := func(ds []*dist) []*dist {
		var out []*dist
		for _, d := range ds {
			if r.matchesAll(name, d.version) {
				out = append(out, d)
			}
		}
		return filterPre(out, r.allowsPre(name))
	}
	cands := match(pure)
	slices.SortFunc(cands, func(a, b *dist) int { // best first
		if c := compareVersions(b.version, a.version); c != 0 {
			return c
		}
		if a.wheel.buildLess(b.wheel) {
			return 1
		}
		if b.wheel.buildLess(a.wheel) {
			return -1
		}
		return cmp.Compare(a.file, b.file)
	})
	var tooNew []string
	for _, d := range cands {
		if err := r.ctx.Err(); err != nil {
			return nil, nil, err
		}
		u, err := r.wh.load(d)
		if err != nil {
			return nil, nil, err
		}
		if !u.meta.requiresPython.contains(pythonVersion) {
			tooNew = append(tooNew, fmt.Sprintf("%s requires Python %s", d.file, u.meta.requiresPython))
			continue
		}
		return d, u, nil
	}
	spec := r.specText(name)
	matching := ""
	if spec != "" {
		matching = " matches " + spec
	}
	if len(tooNew) > 0 {
		return nil, nil, newErr(ErrNotFound, name, fmt.Sprintf("no wheel for Python %s%s: %s", pythonVersion.raw, matching, strings.Join(tooNew, "; ")))
	}
	if m := match(native); len(m) > 0 {
		files := fileList(m)
		return nil, nil, &Error{Kind: ErrNeedsNative, Project: name, Files: files,
			Msg: fmt.Sprintf("no pure-Python wheel%s; only platform-specific wheels or source distributions, which cannot run in the wasm sandbox (escalate to a container where the policy allows): %s",
				matching, strings.Join(files, ", "))}
	}
	if m := match(otherPy); len(m) > 0 {
		files := fileList(m)
		return nil, nil, &Error{Kind: ErrNotFound, Project: name, Files: files,
			Msg: fmt.Sprintf("no wheel for Python 3.13%s; only wheels for other Python versions: %s", matching, strings.Join(files, ", "))}
	}
	msg := "no version" + matching
	if len(r.cons[name]) > 1 {
		msg = fmt.Sprintf("no version matches %s (%s)", spec, r.constraintText(name))
	}
	if len(pure) > 0 {
		msg += fmt.Sprintf(" (installable versions: %s)", versionList(pure))
	} else {
		msg += " (the wheelhouse has no installable version)"
	}
	if len(native) > 0 {
		msg += fmt.Sprintf(" (native or source only: %s)", versionList(native))
	}
	return nil, nil, newErr(ErrNotFound, name, msg)
}

// plan orders the chosen wheels, dependencies first, with Tarjan's strongly connected components (which come out
// dependencies first); members of one component in name order.
func (r *resolver) plan() *Plan {
	names := make([]string, 0, len(r.chosen))
	for n := range r.chosen {
		names = append(names, n)
	}
	slices.Sort(names)
	index := map[string]int{}
	low := map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	p := &Plan{}
	var visit func(v string)
	visit = func(v string) {
		index[v] = len(index)
		low[v] = index[v]
		stack = append(stack, v)
		onStack[v] = true
		deps := sortedKeys(r.chosen[v].deps)
		for _, w := range deps {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var comp []string
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			comp = append(comp, w)
			if w == v {
				break
			}
		}
		slices.Sort(comp)
		if len(comp) > 1 {
			p.cycles = append(p.cycles, comp)
		}
		for _, c := range comp {
			n := r.chosen[c]
			p.wheels = append(p.wheels, planned{u: n.u, info: Wheel{
				Project: c, Name: n.u.meta.name, Version: n.u.meta.version.raw,
				File: n.d.file, SHA256: n.u.sha256, Requires: sortedKeys(n.deps),
			}})
		}
	}
	for _, n := range names {
		if _, seen := index[n]; !seen {
			visit(n)
		}
	}
	for _, n := range sortedKeys(r.used) {
		pv := r.provided[n]
		p.provided = append(p.provided, Wheel{Project: n, Name: pv.name, Version: pv.v.raw})
	}
	return p
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
