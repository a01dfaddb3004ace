package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/wasmbox/wasmbox/wasmbox"
	"github.com/wasmbox/wasmbox/wheels"
)

// PackageInstaller installs Python packages for a sandbox session: the hook for a wheelhouse of pure-Python
// wheels or for escalation to a container. Until one is plugged in with WithPackageInstaller, the Toolkit's
// install_package answers that a package built into the runtime (numpy in "sci") needs no installation, and
// ErrInstallUnavailable for anything else, naming what the program can import.
//
// InstallPackages is called after the Gate allowed the call (install_package is a mutating tool). It may
// write files into req.Workspace (for example unpacked wheels under a directory the program adds to
// sys.path); what it returns is shown to the model, and an error becomes an observation, never an abort.
// It must be safe for concurrent use.
type PackageInstaller interface {
	InstallPackages(ctx context.Context, req InstallRequest) (string, error)
}

// InstallRequest is one install_package call.
type InstallRequest struct {
	// Packages are the requirement strings the model asked for, e.g. "tabulate" or "attrs==23.2.0".
	Packages []string
	// Workspace is the workspace of the session the packages are for.
	Workspace *wasmbox.Workspace
	// Session is the session the packages are for (nil if there is none yet).
	Session *wasmbox.Session
}

// SessionInstaller installs into the session's package layer (/packages) from the sandbox's
// Config.Wheelhouse, through Session.InstallPackages: pure-Python wheels only, allow-listed by the wheelhouse's
// policy. Its report (or error) is what the model sees.
func SessionInstaller() PackageInstaller {
	return PackageInstallerFunc(func(ctx context.Context, req InstallRequest) (string, error) {
		if req.Session == nil {
			return "", fmt.Errorf("%w: no session to install into", ErrInstallUnavailable)
		}
		if len(req.Packages) == 0 {
			return "", errors.New("install_package: no packages given")
		}
		done, err := req.Session.InstallPackages(ctx, req.Packages...)
		var b strings.Builder
		builtinOnly := len(done) > 0
		for _, d := range done {
			if d.BuiltIn {
				writeBuiltIn(&b, d.Wheel)
				continue
			}
			builtinOnly = false
			state := "installed"
			if d.AlreadyPresent {
				state = "already installed"
			}
			fmt.Fprintf(&b, "%s %s %s\n", state, d.Name, d.Version)
		}
		if errors.Is(err, wheels.ErrNeedsNative) {
			return b.String(), fmt.Errorf("%w (this sandbox runs pure-Python packages only: use the standard library or a pure-Python alternative)", err)
		}
		if err != nil {
			return b.String(), err
		}
		if !builtinOnly {
			b.WriteString("import them now; they are on sys.path under /packages\n")
		}
		return b.String(), nil
	})
}

// PackageInstallerFunc adapts a function to PackageInstaller.
type PackageInstallerFunc func(ctx context.Context, req InstallRequest) (string, error)

// InstallPackages calls f(ctx, req).
func (f PackageInstallerFunc) InstallPackages(ctx context.Context, req InstallRequest) (string, error) {
	return f(ctx, req)
}

// builtinOnly is install_package without an installer: requirements the runtime's built-in packages satisfy are
// answered as built in (a version they do not satisfy is an error, as with an installer); anything else is
// ErrInstallUnavailable, naming what the program can import instead.
func builtinOnly(ctx context.Context, builtin wheels.Provided, reqs []string) (string, error) {
	can := "only the Python standard library can be used"
	if len(builtin) > 0 {
		can = "only the Python standard library and the built-in packages (" + strings.Join(builtinNames(builtin), ", ") + ") can be used"
	}
	if len(reqs) == 0 {
		return "", fmt.Errorf("%w; %s", ErrInstallUnavailable, can)
	}
	plan, err := new(wheels.Wheelhouse).ResolveWith(ctx, builtin, reqs...)
	switch {
	case errors.Is(err, wheels.ErrNotFound), errors.Is(err, wheels.ErrNotAllowed):
		return "", fmt.Errorf("%w; %s", ErrInstallUnavailable, can)
	case err != nil:
		return "", fmt.Errorf("%w: %w", ErrInstallUnavailable, err)
	}
	var b strings.Builder
	for _, w := range plan.Provided() {
		writeBuiltIn(&b, w)
	}
	return b.String(), nil
}

// writeBuiltIn is the line install_package answers for a package built into the runtime.
func writeBuiltIn(b *strings.Builder, w wheels.Wheel) {
	fmt.Fprintf(b, "%s %s is built into this sandbox: import it, no installation is needed\n", w.Name, w.Version)
}
