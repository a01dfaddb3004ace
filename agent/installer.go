package agent

import (
	"context"

	"github.com/wasmbox/wasmbox/wasmbox"
)

// PackageInstaller installs Python packages for a sandbox session: the hook for a wheelhouse of pure-Python
// wheels or for escalation to a container (DESIGN.md "install_package and escalation"). Until one is plugged in
// with WithPackageInstaller, install_package answers ErrInstallUnavailable.
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
}

// PackageInstallerFunc adapts a function to PackageInstaller.
type PackageInstallerFunc func(ctx context.Context, req InstallRequest) (string, error)

// InstallPackages calls f(ctx, req).
func (f PackageInstallerFunc) InstallPackages(ctx context.Context, req InstallRequest) (string, error) {
	return f(ctx, req)
}
