// Package provider picks the langchaingo model the examples use.
package provider

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/anthropic"
	"github.com/tmc/langchaingo/llms/ollama"
	"github.com/tmc/langchaingo/llms/openai"
)

// Choose picks the provider: the one named, or with "auto" the first configured of OPENAI_API_KEY,
// ANTHROPIC_API_KEY and OLLAMA_HOST; "scripted" (or nothing configured) returns a nil model and the caller uses
// its scripted one. The model name comes from OPENAI_MODEL, ANTHROPIC_MODEL or OLLAMA_MODEL when set. Nothing
// here touches the network: the first request happens when the agent runs.
func Choose(provider string, getenv func(string) string) (llms.Model, string, error) {
	if provider == "auto" {
		switch {
		case getenv("OPENAI_API_KEY") != "":
			provider = "openai"
		case getenv("ANTHROPIC_API_KEY") != "":
			provider = "anthropic"
		case getenv("OLLAMA_HOST") != "":
			provider = "ollama"
		default:
			provider = "scripted"
		}
	}
	or := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	switch provider {
	case "scripted":
		return nil, "scripted", nil
	case "openai":
		name := or("OPENAI_MODEL", "gpt-4o-mini")
		m, err := openai.New(openai.WithToken(getenv("OPENAI_API_KEY")), openai.WithModel(name))
		return m, "openai " + name, err
	case "anthropic":
		name := or("ANTHROPIC_MODEL", "claude-sonnet-4-5")
		m, err := anthropic.New(anthropic.WithToken(getenv("ANTHROPIC_API_KEY")), anthropic.WithModel(name))
		return m, "anthropic " + name, err
	case "ollama":
		host := or("OLLAMA_HOST", "http://127.0.0.1:11434")
		if !strings.Contains(host, "://") {
			host = "http://" + host
		}
		if _, err := url.Parse(host); err != nil {
			return nil, "", fmt.Errorf("OLLAMA_HOST: %w", err)
		}
		name := or("OLLAMA_MODEL", "qwen2.5-coder:7b")
		m, err := ollama.New(ollama.WithServerURL(host), ollama.WithModel(name))
		return m, "ollama " + name + " at " + host, err
	}
	return nil, "", fmt.Errorf("unknown provider %q (want auto, scripted, openai, anthropic or ollama)", provider)
}
