package escalate

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
)

// A fake engine that runs a whole job: it captures the container-create request, serves attach (hijacked, one
// line of stdout), wait, start, inspect, kill and remove, and plays the container with a Go function that may
// speak to the run's tool socket (found through the bind mount of the create request).

type fakeRun struct {
	*fakeEngine
	mu      sync.Mutex
	create  *container.CreateRequest
	exited  chan struct{}
	once    sync.Once
	killed  bool
	program func(sock string) // the container's program; nil: exits at once
}

func (f *fakeRun) exit() { f.once.Do(func() { close(f.exited) }) }

func newFakeRun(t *testing.T, program func(sock string)) *fakeRun {
	f := &fakeRun{exited: make(chan struct{}), program: program}
	info := map[string]any{
		"ServerVersion": "99.0-fake", "MemoryLimit": true, "PidsLimit": true, "CpuCfsQuota": true,
		"SecurityOptions": []string{"name=seccomp,profile=builtin"},
		"Runtimes":        map[string]any{"runc": map[string]any{"path": "runc"}},
	}
	f.fakeEngine = newFakeEngine(t, "1.45", nil, func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(p, "/info"):
			json.NewEncoder(w).Encode(info)
		case strings.Contains(p, "/images/") && strings.HasSuffix(p, "/json"):
			json.NewEncoder(w).Encode(map[string]any{"Id": "sha256:fake"})
		case strings.HasSuffix(p, "/containers/create"):
			var req container.CreateRequest
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				jsonError(w, http.StatusBadRequest, err.Error())
				return
			}
			f.mu.Lock()
			f.create = &req
			f.mu.Unlock()
			w.WriteHeader(http.StatusCreated)
			json.NewEncoder(w).Encode(map[string]any{"Id": "fakecid", "Warnings": []string{}})
		case strings.HasSuffix(p, "/attach"):
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			buf.WriteString("HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.multiplexed-stream\r\n" +
				"Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
			buf.Flush()
			conn.Write([]byte{byte(stdcopy.Stdout), 0, 0, 0, 0, 0, 0, 3, 'h', 'i', '\n'}) // one stdout frame
			<-f.exited
		case strings.HasSuffix(p, "/wait"):
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-f.exited
			json.NewEncoder(w).Encode(map[string]any{"StatusCode": 0})
		case strings.HasSuffix(p, "/start"):
			sock := ""
			f.mu.Lock()
			if f.create != nil && f.create.HostConfig != nil && len(f.create.HostConfig.Mounts) > 0 {
				sock = filepath.Join(f.create.HostConfig.Mounts[0].Source, "tools.sock")
			}
			f.mu.Unlock()
			go func() {
				if f.program != nil {
					f.program(sock)
				}
				f.exit()
			}()
			w.WriteHeader(http.StatusNoContent)
		case strings.HasSuffix(p, "/kill"):
			f.mu.Lock()
			f.killed = true
			f.mu.Unlock()
			f.exit()
			w.WriteHeader(http.StatusNoContent)
		case r.Method == http.MethodGet && strings.HasSuffix(p, "/containers/fakecid/json"):
			json.NewEncoder(w).Encode(map[string]any{"Id": "fakecid", "State": map[string]any{"Status": "exited", "ExitCode": 0}})
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		default:
			jsonError(w, http.StatusNotFound, "fake engine: no route for "+r.Method+" "+p)
		}
	})
	return f
}

func (f *fakeRun) captured(t *testing.T) *container.CreateRequest {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.create == nil || f.create.Config == nil || f.create.HostConfig == nil {
		t.Fatal("no container-create request captured")
	}
	return f.create
}

// TestFakeRunHardening runs a real job against the fake engine and checks every hardening field of the
// container-create request: removing or weakening any one of them fails this test.
func TestFakeRunHardening(t *testing.T) {
	f := newFakeRun(t, func(sock string) {
		c, err := net.Dial("unix", sock) // the bootstrap's transfer: nothing changed
		if err != nil {
			return
		}
		defer c.Close()
		c.Write([]byte(`{"v":1,"id":1,"op":"done"}` + "\n"))
		bufio.NewReader(c).ReadString('\n')
	})
	d, err := newDockerCtx(t, DockerConfig{Host: f.host(), TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const mem, pids = 64 << 20, 42
	res, err := d.Run(t.Context(), Job{Image: "img", Code: "print('hi')", Limits: Limits{Memory: mem, Pids: pids}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Stdout != "hi\n" || res.ExitCode != 0 || res.FilesTruncated {
		t.Fatalf("result %+v", res)
	}
	req := f.captured(t)
	cfg, hc := req.Config, req.HostConfig
	check := func(what string, ok bool, got any) {
		t.Helper()
		if !ok {
			t.Errorf("%s: got %#v", what, got)
		}
	}
	check("read-only root file system", hc.ReadonlyRootfs, hc.ReadonlyRootfs)
	check("CapDrop ALL", len(hc.CapDrop) == 1 && hc.CapDrop[0] == "ALL", hc.CapDrop)
	check("no capabilities added", len(hc.CapAdd) == 0, hc.CapAdd)
	nnp := false
	for _, o := range hc.SecurityOpt {
		nnp = nnp || o == "no-new-privileges" || o == "no-new-privileges:true" || o == "no-new-privileges=true"
		check("no seccomp/apparmor override", !strings.Contains(o, "unconfined") && !strings.HasPrefix(o, "seccomp"), o)
	}
	check("no-new-privileges", nnp, hc.SecurityOpt)
	check("network none", hc.NetworkMode == "none", hc.NetworkMode)
	check("network disabled", cfg.NetworkDisabled, cfg.NetworkDisabled)
	check("non-root user", cfg.User == User && User == "65534:65534", cfg.User)
	check("pids limit", hc.PidsLimit != nil && *hc.PidsLimit == pids, hc.PidsLimit)
	check("memory limit", hc.Memory == mem, hc.Memory)
	check("memory-swap equal to memory (no swap)", hc.MemorySwap == mem, hc.MemorySwap)
	check("not privileged", !hc.Privileged, hc.Privileged)
	check("CPU limit", hc.NanoCPUs == int64(DefaultCPUs*1e9), hc.NanoCPUs)
	check("private IPC", hc.IpcMode == "private", hc.IpcMode)
	check("no host namespaces", hc.PidMode == "" && hc.UTSMode == "" && hc.UsernsMode == "" && hc.CgroupnsMode != "host", hc)
	check("no devices", len(hc.Devices) == 0, hc.Devices)
	check("log driver none", hc.LogConfig.Type == "none", hc.LogConfig)
	check("no restart", hc.RestartPolicy.Name == container.RestartPolicyDisabled || hc.RestartPolicy.Name == "", hc.RestartPolicy)
	check("no published ports", len(hc.PortBindings) == 0 && !hc.PublishAllPorts, hc.PortBindings)
	check("no binds", len(hc.Binds) == 0, hc.Binds)
	check("one read-only mount, the run directory", len(hc.Mounts) == 1 && hc.Mounts[0].ReadOnly && hc.Mounts[0].Target == RunDir, hc.Mounts)
	ws, tmp := hc.Tmpfs[Workdir], hc.Tmpfs["/tmp"]
	check("workspace tmpfs with a size", len(hc.Tmpfs) == 2 && strings.Contains(ws, "size=67108864") && strings.Contains(ws, "nosuid") && strings.Contains(ws, "nodev"), hc.Tmpfs)
	check("/tmp tmpfs with a size", strings.Contains(tmp, "size=67108864") && strings.Contains(tmp, "nosuid") && strings.Contains(tmp, "nodev"), tmp)
	check("runtime", hc.Runtime == "runc", hc.Runtime)
	check("working directory", cfg.WorkingDir == Workdir, cfg.WorkingDir)
	check("labels", cfg.Labels[LabelManaged] == "1" && cfg.Labels[LabelRun] != "", cfg.Labels)
}
