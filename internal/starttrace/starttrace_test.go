package starttrace

import (
	"strconv"
	"testing"
	"time"
)

// A parent's start time makes the first phase cover the time before the child's main; recording is off without
// the variable, and Mark then records nothing.
func TestFromEnv(t *testing.T) {
	if FromEnv(func(string) string { return "" }) {
		t.Fatal("recording without the variable")
	}
	Mark("ignored")
	if p := Take(); len(p) != 0 {
		t.Fatalf("recorded while off: %v", p)
	}
	t0 := time.Now().Add(-50 * time.Millisecond)
	env := map[string]string{EnvVar: strconv.FormatInt(t0.UnixNano(), 10)}
	if !FromEnv(func(k string) string { return env[k] }) {
		t.Fatal("not recording with the variable set")
	}
	Mark("next")
	p := Take()
	if len(p) != 2 || p[0].Name != ProcessStart || p[0].Took < 50*time.Millisecond || p[1].Name != "next" {
		t.Fatalf("phases %+v", p)
	}
	env[EnvVar] = "1" // not a time: phases start now
	FromEnv(func(k string) string { return env[k] })
	Mark("only")
	if p := Take(); len(p) != 1 || p[0].Name != "only" || p[0].Took > time.Second {
		t.Fatalf("phases %+v", p)
	}
}
