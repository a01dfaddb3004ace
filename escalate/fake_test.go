package escalate

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Contract tests against a fake Engine API server, for what cannot be produced with the real engines here:
// engines that refuse the client's API version, missing engines, images that are missing (asserting that
// nothing is pulled), and engines that cannot enforce the hardening.

type fakeEngine struct {
	*httptest.Server
	mu       sync.Mutex
	requests []string
}

// newFakeEngine serves /_ping with apiVersion, /info with info (merged over a capable engine's), and
// delegates everything else to handle (nil: 404 for everything).
func newFakeEngine(t *testing.T, apiVersion string, info map[string]any, handle http.HandlerFunc) *fakeEngine {
	t.Helper()
	f := &fakeEngine{}
	base := map[string]any{
		"ServerVersion": "99.0-fake", "MemoryLimit": true, "PidsLimit": true, "CpuCfsQuota": true,
		"SecurityOptions": []string{"name=seccomp,profile=builtin"},
		"Runtimes":        map[string]any{"runc": map[string]any{"path": "runc"}},
	}
	for k, v := range info {
		base[k] = v
	}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests = append(f.requests, r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		if apiVersion != "" {
			w.Header().Set("Api-Version", apiVersion)
		}
		switch {
		case r.URL.Path == "/_ping":
			w.Write([]byte("OK"))
		case strings.HasSuffix(r.URL.Path, "/info") && handle == nil:
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(base)
		case handle != nil:
			handle(w, r)
		default:
			jsonError(w, http.StatusNotFound, "page not found")
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeEngine) host() string { return "tcp://" + strings.TrimPrefix(f.URL, "http://") }

func (f *fakeEngine) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requests...)
}

func jsonError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"message": msg})
}

func newDockerCtx(t *testing.T, cfg DockerConfig) (*Docker, error) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	return NewDocker(ctx, cfg)
}

func TestFakeImageMissingIsNeverPulled(t *testing.T) {
	f := newFakeEngine(t, "1.45", nil, nil)
	d, err := newDockerCtx(t, DockerConfig{Host: f.host()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	_, err = d.Run(t.Context(), Job{Image: "python:3.12-slim", Code: "print(1)"})
	if !errors.Is(err, ErrImageNotFound) || !strings.HasPrefix(err.Error(), "escalate: ") {
		t.Fatalf("err = %v, want ErrImageNotFound", err)
	}
	for _, r := range f.seen() {
		if strings.Contains(r, "/images/create") || strings.Contains(r, "/containers/create") {
			t.Errorf("request %q: nothing may be pulled or created for a missing image", r)
		}
	}
	if got := d.APIVersion(); got != "1.45" {
		t.Errorf("negotiated %s with an engine at 1.45", got)
	}
}

func TestFakeEngineTooOldForClient(t *testing.T) {
	// An engine older than the client's minimum (1.40): the client refuses it during negotiation.
	f := newFakeEngine(t, "1.24", nil, nil)
	_, err := newDockerCtx(t, DockerConfig{Host: f.host()})
	if !errors.Is(err, ErrEngineVersion) {
		t.Fatalf("err = %v, want ErrEngineVersion", err)
	}
	t.Log(err)
}

func TestFakeEngineRefusesClientVersion(t *testing.T) {
	// A newer engine that no longer accepts the client's highest version (as Docker 29 refuses < 1.44).
	f := newFakeEngine(t, "1.99", nil, func(w http.ResponseWriter, r *http.Request) {
		jsonError(w, http.StatusBadRequest, "client version 1.56 is too old. Minimum supported API version is 1.60, please upgrade your client to a newer version")
	})
	_, err := newDockerCtx(t, DockerConfig{Host: f.host()})
	if !errors.Is(err, ErrEngineVersion) || !strings.Contains(err.Error(), "too old") {
		t.Fatalf("err = %v, want ErrEngineVersion naming the engine's reason", err)
	}
	t.Log(err)
}

func TestNoEngine(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for name, host := range map[string]string{
		"missing socket": "unix://" + filepath.Join(t.TempDir(), "no-docker.sock"),
		"closed port":    "tcp://" + strings.TrimPrefix(closed.URL, "http://"),
		"garbage host":   "not a docker host",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := newDockerCtx(t, DockerConfig{Host: host})
			if !errors.Is(err, ErrNoEngine) {
				t.Fatalf("err = %v, want ErrNoEngine", err)
			}
		})
	}
	t.Run("DOCKER_HOST", func(t *testing.T) {
		t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-docker.sock"))
		_, err := newDockerCtx(t, DockerConfig{})
		if !errors.Is(err, ErrNoEngine) {
			t.Fatalf("err = %v, want ErrNoEngine", err)
		}
	})
}

func TestFakeUnenforceable(t *testing.T) {
	for name, c := range map[string]struct {
		info    map[string]any
		runtime string
		want    error
	}{
		"no pids limit":      {map[string]any{"PidsLimit": false}, "", ErrUnenforceable},
		"no memory limit":    {map[string]any{"MemoryLimit": false}, "", ErrUnenforceable},
		"seccomp unconfined": {map[string]any{"SecurityOptions": []string{"name=seccomp,profile=unconfined"}}, "", ErrUnenforceable},
		"no seccomp":         {map[string]any{"SecurityOptions": []string{}}, "", ErrUnenforceable},
		"runsc not there":    {nil, "runsc", ErrRuntimeNotFound},
		"runsc, no seccomp": {map[string]any{"Runtimes": map[string]any{"runc": map[string]any{"path": "runc"},
			"runsc": map[string]any{"path": "/usr/bin/runsc", "runtimeArgs": []string{"--platform=systrap"}}}}, "runsc", ErrUnenforceable},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeEngine(t, "1.45", c.info, nil)
			_, err := newDockerCtx(t, DockerConfig{Host: f.host(), Runtime: c.runtime})
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
	f := newFakeEngine(t, "1.45", map[string]any{"Runtimes": map[string]any{"runc": map[string]any{"path": "runc"},
		"runsc": map[string]any{"path": "/usr/bin/runsc", "runtimeArgs": []string{"--oci-seccomp"}}}}, nil)
	d, err := newDockerCtx(t, DockerConfig{Host: f.host(), Runtime: "runsc"})
	if err != nil {
		t.Fatalf("runsc with --oci-seccomp: %v", err)
	}
	if d.Name() != "docker/runsc" {
		t.Errorf("Name() = %q", d.Name())
	}
	d.Close()
	if _, err := d.Run(t.Context(), Job{Image: "x", Code: "1"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close: %v", err)
	}
}
