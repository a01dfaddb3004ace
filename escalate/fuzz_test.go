package escalate

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
)

// FuzzRunSocket feeds arbitrary request lines (what a hostile program can send on tools.sock) to the server:
// it must never panic, always answer one valid JSON object per line, and never accept a path outside the
// workspace or more than its byte limit.
func FuzzRunSocket(f *testing.F) {
	for _, seed := range []string{
		`{"v":1,"id":1,"op":"call","tool":"echo","args":{"a":1}}`,
		`{"v":1,"id":2,"op":"file","path":"a/b","data":"aGk="}` + "\n" + `{"v":1,"id":3,"op":"file","path":"a/b","append":true,"data":"aGk="}` + "\n" + `{"v":1,"op":"done"}`,
		`{"v":1,"op":"file","path":"../../etc/passwd","data":""}`,
		`{"v":1,"op":"delete","path":"/x"}`,
		`{"v":1,"op":"call","tool":"echo","args":[]}`,
		`{"v":1,"op":"call","tool":"echo","args":"  "}`,
		`{"v":1,"op":"call","args":{}}`,
		`{"v":"1"}`, `null`, `[]`, `{}`, "\x00",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		tools := func(ctx context.Context, tool string, args json.RawMessage) (json.RawMessage, error) {
			return args, nil
		}
		s := newRunServer(context.Background(), tools, nil, serverLimits{outBytes: 64})
		var cur *fileState
		for _, line := range bytes.Split(input, []byte("\n")) {
			var resp response
			resp, cur = s.handle(line, cur)
			b, err := json.Marshal(resp)
			if err != nil || !json.Valid(b) {
				t.Fatalf("response %+v: %v", resp, err)
			}
			if resp.OK == (resp.Error != nil) {
				t.Fatalf("ok and error disagree: %s", b)
			}
		}
		files, changes, _ := s.changes(nil)
		var total int
		for p, data := range files {
			if _, err := cleanPath(p); err != nil || p != cleanOrEmpty(p) {
				t.Fatalf("accepted path %q", p)
			}
			total += len(data)
		}
		if total > 64 {
			t.Fatalf("accepted %d bytes over a 64-byte limit", total)
		}
		_ = changes
	})
}

func cleanOrEmpty(p string) string {
	c, err := cleanPath(p)
	if err != nil {
		return ""
	}
	return c
}
