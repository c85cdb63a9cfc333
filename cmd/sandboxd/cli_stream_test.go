package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/api"
)

// TestCLICallStream: call --stream prints the output as it came, stdout's
// to stdout and stderr's to stderr, then the result on a line of its own;
// without --stream the same call prints the result only.
func TestCLICallStream(t *testing.T) {
	addr, dataDir, _ := cliServer(t)
	common := []string{"--addr", addr, "--data-dir", dataDir}
	code, out, errs := runCLI(t, "", append([]string{"run", "create", "--conversation", "c1", "--json"}, common...)...)
	if code != 0 {
		t.Fatalf("run create: %d %s", code, errs)
	}
	var run api.Run
	if err := json.Unmarshal([]byte(out), &run); err != nil || run.ID == "" {
		t.Fatalf("run create printed %s", out)
	}
	id := run.ID
	code, out, errs = runCLI(t, "", append([]string{"call", "--stream", "--run", id, "echo", `{"text":"talk"}`}, common...)...)
	if code != 0 || out != "partial\necho: talk\n" || errs != "warn\n" {
		t.Fatalf("call --stream: %d stdout %q stderr %q", code, out, errs)
	}
	code, out, errs = runCLI(t, "", append([]string{"call", "--run", id, "echo", `{"text":"talk"}`}, common...)...)
	if code != 0 || out != "echo: talk\n" || errs != "" {
		t.Fatalf("call: %d stdout %q stderr %q", code, out, errs)
	}
	if code, _, errs = runCLI(t, "", append([]string{"call", "--stream", "--run", id, "nope"}, common...)...); code != 1 || !strings.Contains(errs, `"nope"`) {
		t.Fatalf("call --stream of an unknown tool: %d %s", code, errs)
	}
}
