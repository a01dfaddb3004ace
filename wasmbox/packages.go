package wasmbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/wasmbox/wasmbox/internal/vfs"
	"github.com/wasmbox/wasmbox/wheels"
)

// ErrPackage: a package could not be installed (not in the wheelhouse, not allowed, needs native code, a bad
// wheel, a conflict); the wrapped wheels error says which (errors.Is(err, wheels.ErrNeedsNative), ...).
var ErrPackage = errors.New("wasmbox: package not installed")

// Package layer quotas: generous, since the host decides what goes in.
const (
	packageLayerBytes = 1 << 30
	packageLayerFiles = 200_000
)

// newPackageLayer returns an empty package layer. The guest only ever sees a layer through the engine's read-only
// view (every write flag and mutating operation is EROFS); the Sandbox's own layer, which every Run shares, is
// also frozen once its packages are installed (freezePackages), so nothing, host included, can change it after
// New. A Session gets its own unfrozen Clone, which only its InstallPackages writes.
func newPackageLayer() *vfs.FS {
	return vfs.New(vfs.Limits{MaxBytes: packageLayerBytes, MaxFiles: packageLayerFiles})
}

// freezePackages makes the Sandbox's shared layer immutable: Runs share it, so no run (and no host code) may
// change what another run sees.
func freezePackages(layer *vfs.FS) { layer.Freeze() }

func installPackages(ctx context.Context, wh *wheels.Wheelhouse, layer *vfs.FS, reqs []string, provided wheels.Provided) ([]wheels.Installed, error) {
	noWheelhouse := wh == nil
	if noWheelhouse {
		wh = new(wheels.Wheelhouse) // the runtime's built-in packages still resolve
	}
	plan, err := wh.ResolveWith(ctx, provided, reqs...)
	if noWheelhouse && (errors.Is(err, wheels.ErrNotAllowed) || errors.Is(err, wheels.ErrNotFound)) {
		return nil, fmt.Errorf("%w: %s: no Wheelhouse is configured%s", ErrPackage, strings.Join(reqs, ", "), builtinNote(provided))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrPackage, strings.Join(reqs, ", "), err)
	}
	done, err := plan.Install(ctx, layer)
	if err != nil {
		return done, fmt.Errorf("%w: %s: %w", ErrPackage, strings.Join(reqs, ", "), err)
	}
	return done, nil
}

// builtinNote names the runtime's built-in packages for an error message.
func builtinNote(provided wheels.Provided) string {
	if len(provided) == 0 {
		return ""
	}
	names := make([]string, 0, len(provided))
	for n, v := range provided {
		names = append(names, n+" "+v)
	}
	slices.Sort(names)
	return " (built in: " + strings.Join(names, ", ") + ")"
}

// InstallPackages installs requirements ("tabulate", "attrs==23.2.0") from Config.Wheelhouse into this
// session's package layer (/packages, read-only to the program); the next Exec can import them. Only
// pure-Python wheels install here: a package that needs native code fails with an error wrapping
// wheels.ErrNeedsNative (escalate/ runs such code in a container, where policy allows).
//
// Packages built into the runtime (numpy and pandas in "sci") are never installed or replaced: a request for one
// returns it marked BuiltIn (with or without a Wheelhouse), wheels that depend on one resolve against it, and a
// version it does not satisfy is an error wrapping wheels.ErrConflict.
//
// It may be called while an Exec runs (from a tool the program calls): the program can import the packages as
// soon as the call returns.
func (se *Session) InstallPackages(ctx context.Context, requirements ...string) ([]wheels.Installed, error) {
	se.pkgMu.Lock()
	defer se.pkgMu.Unlock()
	done, err := installPackages(ctx, se.sb.cfg.Wheelhouse, se.packages, requirements, se.sb.cfg.provided)
	if len(done) > 0 {
		se.installed.Store(true)
	}
	return done, err
}
