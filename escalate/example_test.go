package escalate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"

	"github.com/wasmbox/wasmbox/escalate"
)

// Runs Python in a hardened gVisor container, with one input file, one tool and a policy. It needs a container
// engine (see .ci/escalation.sh), so it is compiled but not run by go test.
func Example() {
	ctx := context.Background()
	docker, err := escalate.NewDocker(ctx, escalate.DockerConfig{Runtime: "runsc"})
	if errors.Is(err, escalate.ErrNoEngine) {
		log.Fatal("no container engine: escalation is unavailable (nothing runs on the host instead)")
	} else if err != nil {
		log.Fatal(err)
	}
	defer docker.Close()
	backend := escalate.WithPolicy(docker, escalate.AllowImages("wasmbox-test-python:latest"))

	res, err := backend.Run(ctx, escalate.Job{
		Image: "wasmbox-test-python:latest",
		Code: `
import wasmbox_tools as tools
n = len(open("data.csv").read().splitlines())
open("summary.txt", "w").write(f"{n} rows")
print(tools.call("double", x=n))
`,
		Files: map[string][]byte{"data.csv": []byte("a,b\n1,2\n")},
		Tools: func(ctx context.Context, tool string, args json.RawMessage) (json.RawMessage, error) {
			if tool != "double" {
				return nil, &escalate.ToolError{Type: "ToolDenied", Message: "unknown tool"}
			}
			var a struct{ X int }
			if err := json.Unmarshal(args, &a); err != nil {
				return nil, err
			}
			return json.Marshal(2 * a.X)
		},
		Limits: escalate.Limits{Memory: 256 << 20},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := res.Err(); errors.Is(err, escalate.ErrOOM) {
		log.Fatal("out of memory")
	}
	fmt.Print(res.Stdout)                         // 4
	fmt.Println(string(res.Files["summary.txt"])) // 2 rows
}
