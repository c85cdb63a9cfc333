package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/audit"
)

// TestAuditDocker runs a mixed workload through the real daemon and checks
// the audit record a compliance reviewer would: exactly one record per
// call and per request; after sandboxd is killed with -9 in a burst of
// write calls, a record of every write whose answer came back; and
// `sandboxd audit verify` passing on the files, then naming a record
// edited by hand.
func TestAuditDocker(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 to run against the Docker engine")
	}
	dataDir := t.TempDir()
	// Small files, so the chain crosses many of them.
	cfg := filepath.Join(t.TempDir(), "sandboxd.yaml")
	if err := os.WriteFile(cfg, []byte("audit: {max_file_bytes: 16384, retention: 1000}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "docker", dataDir, "--config", cfg)
	sb, err := d.Client.CreateSandbox(ctx(t), createReq("docker", "conv-audit"))
	if err != nil {
		t.Fatal(err)
	}
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-audit"})
	if err != nil {
		t.Fatal(err)
	}

	// The workload: several tool families, and calls that fail in each
	// way a caller sees (a tool error, bad arguments, an unknown tool).
	calls := map[string]int{}
	do := func(tool string, args any) (string, error) {
		calls[tool]++
		return call(t, d, run.ID, tool, args)
	}
	hasAstGrep := slices.Contains(toolNames(run.Tools), "ast_grep")
	for i := range 40 {
		p := fmt.Sprintf("w/f%d.go", i)
		if _, err := do("write", map[string]any{"path": p, "content": fmt.Sprintf("package w\n\nfunc F%d() int { return %d }\n", i, i)}); err != nil {
			t.Fatal(err)
		}
		if _, err := do("read", map[string]any{"path": p}); err != nil {
			t.Fatal(err)
		}
		if _, err := do("edit", map[string]any{"path": p, "old": fmt.Sprintf("return %d", i), "new": fmt.Sprintf("return %d", i+1)}); err != nil {
			t.Fatal(err)
		}
		if _, err := do("shell", map[string]any{"command": fmt.Sprintf("echo %d", i)}); err != nil {
			t.Fatal(err)
		}
		if hasAstGrep && i%4 == 0 {
			if _, err := do("ast_grep", map[string]any{"pattern": "func $F() int { $$$ }", "language": "go"}); err != nil {
				t.Fatal(err)
			}
		}
		if i%10 == 0 {
			if _, err := do("eval", evalArgs("python", "1+1")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := do("read", map[string]any{"path": "no/such/file"}); err == nil {
		t.Fatal("reading a missing file succeeded")
	}
	if _, err := do("write", map[string]any{"nonsense": true}); err == nil {
		t.Fatal("a write with bad arguments succeeded")
	}
	if _, err := d.Client.CallTool(ctx(t), run.ID, "no_such_tool", nil); err == nil {
		t.Fatal("an unknown tool answered")
	}
	// A write of a run that asks for approval, with nobody connected to
	// its space: refused at once, and the record says why.
	ask, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-audit", Approval: "ask", Space: "audit-space"})
	if err != nil {
		t.Fatal(err)
	}
	calls["write"]++
	if _, err := call(t, d, ask.ID, "write", map[string]any{"path": "denied.txt", "content": "x"}); err == nil {
		t.Fatal("a write needing approval ran with nobody to approve it")
	}
	// With a human connected: one write denied, one allowed once.
	events, hang := human(t, d.Client, "audit-space")
	for _, choice := range []int{3, 1} {
		calls["write"]++
		tc := callAsync(d, d.Client, ask.ID, "write", map[string]any{"path": fmt.Sprintf("asked-%d.txt", choice), "content": "x"})
		q := nextCard(t, events)
		if _, err := d.Client.AnswerQuestion(ctx(t), q.ID, api.Answer{Choices: []int{choice}}); err != nil {
			t.Fatal(err)
		}
		if _, isErr := tc.wait(t); isErr != (choice == 3) {
			t.Fatalf("the write answered %d: is_error %v", choice, isErr)
		}
	}
	hang()
	total := 0
	for _, n := range calls {
		total += n
	}
	t.Logf("workload: %d tool calls %v", total, calls)

	// Every tool call is one tool record; the unknown tool, refused before
	// the registry, one API record of its route; the create calls one
	// each. Records of requests are appended as they end: wait for them.
	var recs []audit.Record
	waitFor(t, 30*time.Second, "the workload's records", func() error {
		recs = auditRecords(t, d)
		tools, apis := map[string]int{}, map[string]int{}
		for _, r := range recs {
			switch r.Kind {
			case audit.KindTool:
				tools[r.Action]++
			case audit.KindAPI:
				apis[r.Action]++
			}
		}
		if fmt.Sprint(tools) != fmt.Sprint(calls) {
			return fmt.Errorf("tool records %v, calls %v", tools, calls)
		}
		for route, want := range map[string]int{"POST /v1/runs/{id}/tools/{name}": 1, "POST /v1/sandboxes": 1, "POST /v1/runs": 2} {
			if apis[route] != want {
				return fmt.Errorf("%d API records of %s, want %d (all: %v)", apis[route], route, want, apis)
			}
		}
		return nil
	})
	outcomes := map[string]int{}
	for _, r := range recs {
		if r.Kind == audit.KindTool && r.Run == ask.ID {
			if r.Outcome != map[string]string{"no_human": "tool_error", "denied": "tool_error", "allow_once": "ok"}[r.Approval] {
				t.Fatalf("an approval's record: %+v", r)
			}
			outcomes[r.Approval]++
			continue
		}
		if r.Kind == audit.KindTool {
			outcomes[r.Outcome]++
			if r.Run != run.ID || r.Sandbox != sb.ID || r.Tenant != "admin" || r.TokenID != audit.TokenID(d.Token) || r.ArgsSHA256 == "" {
				t.Fatalf("a tool record lacks what it should say: %+v", r)
			}
			if r.Action == "shell" && r.Level != "exec" || r.Action == "write" && r.Level != "write" || r.Action == "read" && r.Level != "read" {
				t.Fatalf("a record's level: %+v", r)
			}
		}
	}
	if outcomes["tool_error"] != 1 || outcomes["invalid_arguments"] != 1 || outcomes["no_human"] != 1 || outcomes["denied"] != 1 || outcomes["allow_once"] != 1 {
		t.Fatalf("outcomes %v, want one each of tool_error, invalid_arguments, and the approvals no_human, denied and allow_once", outcomes)
	}

	// A burst of write calls, and sandboxd killed with -9 in the middle:
	// every write whose answer came back has its record on disk.
	var mu sync.Mutex
	var acked []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("burst-%d-%d", g, i)
				body := fmt.Sprintf(`{"path":"burst/%d-%d.txt","content":"%d"}`, g, i, i)
				if rawCall(d, run.ID, "write", id, body) != nil {
					return
				}
				mu.Lock()
				acked = append(acked, id)
				mu.Unlock()
			}
		}()
	}
	waitFor(t, 60*time.Second, "100 writes of the burst answered", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(acked) < 100 {
			return fmt.Errorf("%d answered", len(acked))
		}
		return nil
	})
	d.kill()
	close(stop)
	wg.Wait()
	onDisk := map[string]bool{}
	for _, r := range readAuditDir(t, filepath.Join(dataDir, "audit")) {
		if r.Kind == audit.KindTool && r.Action == "write" && r.Outcome == "ok" {
			onDisk[r.RequestID] = true
		}
	}
	for _, id := range acked {
		if !onDisk[id] {
			t.Errorf("the write %s was answered, but its audit record is not on disk after kill -9", id)
		}
	}
	t.Logf("%d writes answered before kill -9, each with its record", len(acked))

	// The restarted daemon goes on with the same chain.
	d.start()
	mustCall(t, d, run.ID, "read", map[string]any{"path": "w/f1.go"})
	if err := d.Client.DeleteSandbox(ctx(t), sb.ID); err != nil {
		t.Fatal(err)
	}
	d.stop()

	dir := filepath.Join(dataDir, "audit")
	out, code := verify(t, dir)
	if code != 0 || !strings.Contains(out, "is whole") {
		t.Fatalf("audit verify on the untouched record: exit %d: %s", code, out)
	}
	t.Log(strings.TrimSpace(out))

	// Edit one record in the middle of the first file by hand.
	files, _ := filepath.Glob(filepath.Join(dir, "audit-*.jsonl"))
	sort.Strings(files)
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(b, []byte("\n"))
	const edited = 10 // line number
	var r audit.Record
	json.Unmarshal(lines[edited-1], &r)
	lines[edited-1] = bytes.Replace(lines[edited-1], []byte(`"outcome":"`+r.Outcome+`"`), []byte(`"outcome":"ok","x":"`+r.Outcome+`"`), 1)
	if err := os.WriteFile(files[0], bytes.Join(lines, []byte("\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code = verify(t, dir)
	want := fmt.Sprintf("seq %d at %s line %d was changed", r.Seq, filepath.Base(files[0]), edited)
	if code != 1 || !strings.Contains(out, want) {
		t.Fatalf("audit verify on an edited record: exit %d: %s; want it to say %q", code, out, want)
	}
	t.Log(strings.TrimSpace(out))
}

// rawCall calls a tool with its own request id, as a platform may.
func rawCall(d *daemon, run, tool, requestID, body string) error {
	req, err := http.NewRequest("POST", d.URL+"/v1/runs/"+run+"/tools/"+tool, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+d.Token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(api.HeaderRequestID, requestID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var res api.ToolResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil || resp.StatusCode != 200 || res.IsError {
		return fmt.Errorf("status %d, %v, %+v", resp.StatusCode, err, res)
	}
	return nil
}

// auditRecords reads every record the daemon's token sees, through
// GET /v1/audit a page at a time, leaving out the reads of the record.
func auditRecords(t *testing.T, d *daemon) []audit.Record {
	t.Helper()
	return auditRecordsAt(t, d.URL, d.Token, "")
}

// auditRecordsAt reads every record token sees at base through
// GET /v1/audit?query, a page of 1000 at a time, leaving out the reads of
// the record; a refusal fails the test.
func auditRecordsAt(t *testing.T, base, token, query string) []audit.Record {
	t.Helper()
	recs, status := auditPagesAt(t, base, token, query, 1000)
	if status != http.StatusOK {
		t.Fatalf("GET /v1/audit?%s at %s: %d", query, base, status)
	}
	return recs
}

// auditPagesAt reads the pages of GET /v1/audit?query of limit records
// each, leaving out the reads of the record, until the cursor ends or a
// page is refused with a 4xx (its status is returned, and no record).
func auditPagesAt(t *testing.T, base, token, query string, limit int) ([]audit.Record, int) {
	t.Helper()
	var out []audit.Record
	cursor := ""
	for range 1000 {
		u := fmt.Sprintf("%s/v1/audit?limit=%d", base, limit)
		if query != "" {
			u += "&" + query
		}
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		req, _ := http.NewRequestWithContext(ctx(t), "GET", u, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var p api.AuditPage
		err = json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		switch {
		case resp.StatusCode >= 400 && resp.StatusCode < 500:
			return nil, resp.StatusCode
		case err != nil || resp.StatusCode != 200:
			t.Fatalf("GET %s: %d %v", u, resp.StatusCode, err)
		case len(p.Records) > limit:
			t.Fatalf("a page of limit %d has %d records", limit, len(p.Records))
		case len(p.Unreached) > 0:
			t.Fatalf("GET /v1/audit at %s: replicas %v did not answer", base, p.Unreached)
		}
		for _, r := range p.Records {
			if r.Action != "GET /v1/audit" {
				out = append(out, r)
			}
		}
		if p.Next == "" {
			return out, http.StatusOK
		}
		cursor = p.Next
	}
	t.Fatal("GET /v1/audit's cursor never ended")
	return nil, 0
}

// readAuditDir reads the files as a reviewer would, with no daemon.
func readAuditDir(t *testing.T, dir string) []audit.Record {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "audit-*.jsonl"))
	sort.Strings(files)
	var out []audit.Record
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var r audit.Record
			if json.Unmarshal(sc.Bytes(), &r) == nil {
				out = append(out, r)
			}
		}
		fh.Close()
	}
	return out
}

// verify runs the built binary's `audit verify DIR`.
func verify(t *testing.T, dir string) (string, int) {
	t.Helper()
	cmd := exec.Command(bins.sandboxd, "audit", "verify", dir)
	out, err := cmd.CombinedOutput()
	if err != nil && cmd.ProcessState == nil {
		t.Fatal(err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}
