package governance

import "context"

// A DeadlinePauser stops the caller's deadline clock while the gate waits for a human. The sandbox puts one in
// the context of every tool call it makes: the program's time limit then measures the program and its tools,
// not how long a person took to answer, and the wait is bounded by the approval timeout and by the caller's own
// context instead.
type DeadlinePauser interface {
	// PauseDeadline stops the clock; the returned function restarts it. Both are called once per approval.
	PauseDeadline() (resume func())
}

type pauserKey struct{}

// WithDeadlinePauser returns a context that carries p to the gate.
func WithDeadlinePauser(ctx context.Context, p DeadlinePauser) context.Context {
	return context.WithValue(ctx, pauserKey{}, p)
}

func deadlinePauser(ctx context.Context) DeadlinePauser {
	p, _ := ctx.Value(pauserKey{}).(DeadlinePauser)
	return p
}
