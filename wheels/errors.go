package wheels

import (
	"errors"
	"strings"
)

// Sentinel errors. Every error of this package starts with "wheels: " and, where it is one of these cases, is an
// *Error whose Kind is the sentinel, so that errors.Is(err, ErrNotFound) and errors.As(err, &e) both work.
var (
	// ErrNotFound: the wheelhouse has no installable version of the project that matches the request, or no file
	// for the project at all. The message names the versions that exist.
	ErrNotFound = errors.New("wheels: not found")
	// ErrNotAllowed: the project, or a dependency in the resolved closure, is not on the policy's allow-list
	// (Options.Allow; an empty list denies everything).
	ErrNotAllowed = errors.New("wheels: not allowed by policy")
	// ErrNeedsNative: the only matching distributions are platform-specific wheels (an ABI or a platform tag,
	// such as cp313-cp313-manylinux_2_17_x86_64) or source distributions, which cannot run in the wasm sandbox.
	// Error.Files names them, so the caller can escalate to a container where the policy allows it.
	ErrNeedsNative = errors.New("wheels: needs native code")
	// ErrBadWheel: a wheel is corrupt or unsafe: not a zip, METADATA, WHEEL or RECORD missing or malformed, a file
	// that does not match its RECORD hash or size, a path escaping the install root, a symbolic link, name or
	// version differing from the file name, or a wheel name in the wheelhouse that does not parse.
	ErrBadWheel = errors.New("wheels: bad wheel")
	// ErrConflict: the requirements cannot be satisfied together (resolution does not backtrack: it names the
	// constraints and the version chosen), or the layer already holds another version of a project or a file with
	// other content (layers are append-only).
	ErrConflict = errors.New("wheels: conflict")
	// ErrHashMismatch: a wheel's SHA-256 differs from the one pinned in Options.Hashes or in the wheelhouse's
	// SHA256SUMS, or no hash is pinned for it while Options.RequireHashes is set.
	ErrHashMismatch = errors.New("wheels: hash mismatch")
	// ErrInvalid: malformed input: a project name, requirement or version specifier that does not parse, or
	// invalid Options.
	ErrInvalid = errors.New("wheels: invalid")
)

// Error is the error this package returns for its typed cases. Its message reads
// "<Kind>: <Project>: <Msg>[: <Err>]", e.g.
//
//	wheels: not found: textfmt: no version matches >=3 (the wheelhouse has 1.0, 2.0)
type Error struct {
	Kind    error    // one of the sentinels above
	Project string   // the normalised project name, if the error is about one
	Files   []string // wheelhouse files involved (for ErrNeedsNative: the native wheels and sdists that match)
	Msg     string   // what went wrong, in words
	Err     error    // the underlying error, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Kind != nil {
		b.WriteString(e.Kind.Error())
	} else {
		b.WriteString("wheels: error")
	}
	if e.Project != "" {
		b.WriteString(": " + e.Project)
	}
	if e.Msg != "" {
		b.WriteString(": " + e.Msg)
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

// Unwrap returns Kind and Err, for errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	var out []error
	if e.Kind != nil {
		out = append(out, e.Kind)
	}
	if e.Err != nil {
		out = append(out, e.Err)
	}
	return out
}

func newErr(kind error, project, msg string) *Error {
	return &Error{Kind: kind, Project: project, Msg: msg}
}
