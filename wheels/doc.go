// Package wheels installs pure-Python wheels from a host wheelhouse directory into a layer that the sandbox mounts
// read-only at /packages (on sys.path in the guest): the in-sandbox half of install_package; it fails closed.
// No network is ever used: what is not in the wheelhouse does not exist.
//
// Here's an example:
//
//	wh, err := wheels.Open("/srv/wheelhouse", wheels.Options{
//		Allow: []string{"textfmt", "wcwidthlite"}, // nil or empty denies everything
//	})
//	plan, err := wh.Resolve(ctx, "textfmt", ">=2")   // or wh.ResolveAll(ctx, "textfmt>=2", "attrs")
//	layer := new(wheels.MemLayer)                    // or a *vfs.FS, or any Layer
//	installed, err := plan.Install(ctx, layer)       // layer is an fs.FS: mount it at /packages
//
// # What installs
//
// Wheels CPython 3.13 on wasi can run: no ABI ("none") and no platform ("any"), with a python tag of py3, py30 …
// py313 or cp313 (py3-none-any, py2.py3-none-any, cp313-none-any), as packaging.tags orders them for cp313. Wheel
// file names follow PEP 427 and PEP 491 (build tags break ties); project names are compared normalised (PEP 503,
// Normalize). Everything else in the wheelhouse only informs errors: a platform-specific wheel
// (cp313-cp313-manylinux_2_17_x86_64) or a source distribution (.tar.gz, .zip) that matches gives ErrNeedsNative
// with the file names, so the caller can escalate to a container (package escalate) where the policy allows it.
//
// # Resolution
//
// Versions and specifiers follow PEP 440 (epochs, pre-, post- and dev-releases, local versions; the operators ==,
// !=, <, <=, >, >=, ~=, === and == / != with a .* wildcard). The highest version that satisfies every constraint
// seen so far wins; pre-releases only when a constraint names one or nothing else matches; wheels whose
// Requires-Python excludes 3.13.5 are skipped. Dependencies come from Requires-Dist (PEP 508), breadth first,
// with environment markers evaluated for the sandbox's interpreter:
//
//	python_version "3.13", python_full_version "3.13.5", implementation_name "cpython",
//	implementation_version "3.13.5", platform_python_implementation "CPython", os_name "posix",
//	sys_platform "wasi", platform_system "wasi", platform_machine "wasm32", platform_release "0.0.0",
//	platform_version "0.0.0"
//
// and extra set to "" and to each extra requested ("textfmt[wide]"): extras not requested are ignored. There is
// no backtracking: a constraint that arrives after its project's version was chosen, and that the version does
// not satisfy, is an ErrConflict that names all the constraints and the versions that would satisfy them (pin
// one). Dependency cycles are legal in Python packaging and are accepted (Plan.Cycles lists them).
//
// # Policy and integrity
//
// Options.Allow is the allow-list of projects, and every project of the resolved closure must be on it: a
// dependency that is not gives ErrNotAllowed naming who required it. Nil or empty denies everything; "*" allows
// everything. Wheels can be pinned by SHA-256 (Options.Hashes, or a SHA256SUMS file in the wheelhouse);
// Options.RequireHashes refuses unpinned ones.
//
// A wheel is unpacked only after its pins are checked, and then verified completely (ErrBadWheel otherwise): a
// valid zip with exactly one .dist-info holding METADATA, WHEEL (Wheel-Version 1.x) and RECORD; the .dist-info,
// METADATA and the file name agreeing on name and version; every file listed in RECORD with a sha256 (or sha384,
// sha512) hash and size that match, and every RECORD entry present; no absolute path, "..", backslash, drive
// letter or empty component; no symbolic link or other non-regular file; at most 256 MiB of wheel, 100,000
// entries, and Options.MaxUnpackedSize (512 MiB by default) unpacked, checked against the sizes the archive
// declares before anything is decompressed, each entry then read no further than its declared size; METADATA,
// WHEEL and entry_points.txt of at most 1 MiB each (MaxMetadataFileSize) and a RECORD of at most 16 MiB
// (MaxRecordFileSize), checked before they are decompressed. Files under {name}.data/purelib and .data/platlib install into the root;
// .data/scripts, headers and data are skipped and reported in Installed.Skipped (there is no bin directory or
// prefix in the sandbox); any other .data scheme is an ErrBadWheel.
//
// # Caching and concurrency
//
// A wheel is read, hashed and unpacked at most once per process: the unpacked files are cached by the wheel's
// SHA-256 and the unpacked-size limit (errors too: the same bytes always fail the same way), so any number of Wheelhouses, Plans and layers
// share them, and Install never rereads a zip. Wheelhouse, Plan and MemLayer are safe for concurrent use. The
// cache is never evicted: it holds every distinct wheel this process has used.
//
// # Layers
//
// Install writes through the two-method Layer interface (MkdirAll, WriteFile; *vfs.FS satisfies it). Layers are
// append-only: when Install can read the layer (an fs.FS, such as MemLayer, or a *vfs.FS), an already installed
// identical version is a no-op, another version of an installed project is an ErrConflict, and so is a file that
// exists with other content; all of that is checked for the whole plan before anything is written. Each
// installed .dist-info gets a RECORD rewritten for the installed paths and INSTALLER "wasmbox", so
// importlib.metadata works in the guest.
//
// # Errors
//
// Every error starts with "wheels: ". The typed cases are *Error values whose Kind is one of ErrNotFound,
// ErrNotAllowed, ErrNeedsNative, ErrBadWheel, ErrConflict, ErrHashMismatch and ErrInvalid, so errors.Is works on
// the sentinel and errors.As gives the project and the files involved.
package wheels
