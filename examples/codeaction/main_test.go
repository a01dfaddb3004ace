package main

import (
	"bytes"
	"context"
	"github.com/wasmbox/wasmbox/examples/internal/provider"
	"strings"
	"testing"
)

func noEnv(string) string { return "" }

// Offline, the example runs its scripted model, says so, and prints 1218.5.
func TestScriptedSeedQuestion(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), nil, &out, &errb, noEnv); code != 0 {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	if out.String() != "1218.5\n" {
		t.Errorf("stdout %q", out.String())
	}
	for _, want := range []string{"using a SCRIPTED model", "step 1: running a program", "tool get_order: ok", "2 step(s), 0 repair(s), 6 tool call(s), answer from final_answer"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}
}

func TestProviderChoice(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	for _, tc := range []struct {
		provider string
		env      map[string]string
		want     string
	}{
		{"auto", nil, "scripted"},
		{"auto", map[string]string{"OPENAI_API_KEY": "k"}, "openai gpt-4o-mini"},
		{"auto", map[string]string{"ANTHROPIC_API_KEY": "k", "ANTHROPIC_MODEL": "claude-x"}, "anthropic claude-x"},
		{"auto", map[string]string{"OLLAMA_HOST": "127.0.0.1:11434"}, "ollama qwen2.5-coder:7b at http://127.0.0.1:11434"},
		{"scripted", map[string]string{"OPENAI_API_KEY": "k"}, "scripted"},
	} {
		_, name, err := provider.Choose(tc.provider, env(tc.env))
		if err != nil || name != tc.want {
			t.Errorf("%s %v: %q, %v; want %q", tc.provider, tc.env, name, err, tc.want)
		}
	}
	var errb bytes.Buffer
	if code := run(context.Background(), []string{"-provider", "gpt"}, &bytes.Buffer{}, &errb, noEnv); code != 2 {
		t.Errorf("unknown provider: exit %d", code)
	}
}
