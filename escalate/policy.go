package escalate

import (
	"context"
	"fmt"
	"slices"
)

// Policy decides whether a job may leave the wasm sandbox for a container. A Backend runs whatever it is asked;
// the decision belongs to the caller (the agent's install_package, a tool...), which asks Allowed, or wraps its
// backend with WithPolicy so that it cannot forget to.
type Policy interface {
	// AllowEscalation returns nil to allow the job, or an error saying why not.
	AllowEscalation(ctx context.Context, job Job) error
}

// PolicyFunc adapts a function to Policy.
type PolicyFunc func(ctx context.Context, job Job) error

// AllowEscalation calls f.
func (f PolicyFunc) AllowEscalation(ctx context.Context, job Job) error { return f(ctx, job) }

// Allowed asks p whether job may escalate. It denies by default: a nil policy allows nothing, and a policy that
// panics denies. Every denial wraps ErrNotAllowed (and the policy's own error).
func Allowed(ctx context.Context, p Policy, job Job) (err error) {
	if p == nil {
		return fmt.Errorf("%w: no escalation policy", ErrNotAllowed)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: the policy panicked: %v", ErrNotAllowed, r)
		}
	}()
	if perr := p.AllowEscalation(ctx, job); perr != nil {
		return fmt.Errorf("%w: %w", ErrNotAllowed, perr)
	}
	return nil
}

// AllowImages is a policy that allows jobs whose Image is one of images (exact references, e.g.
// "wasmbox-python:3.11"), and denies every other.
func AllowImages(images ...string) Policy {
	allowed := slices.Clone(images)
	return PolicyFunc(func(_ context.Context, job Job) error {
		if slices.Contains(allowed, job.Image) {
			return nil
		}
		return fmt.Errorf("image %q is not in the allowed list", job.Image)
	})
}

// WithPolicy returns a Backend that checks p (with Allowed) before every run and otherwise behaves like b.
func WithPolicy(b Backend, p Policy) Backend { return &guarded{b, p} }

type guarded struct {
	Backend
	p Policy
}

func (g *guarded) Run(ctx context.Context, job Job) (*Result, error) {
	if err := Allowed(ctx, g.p, job); err != nil {
		return nil, err
	}
	return g.Backend.Run(ctx, job)
}
