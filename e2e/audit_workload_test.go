package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/api/client"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/tools/toolstest"
)

const (
	awTokenAcme  = "sbx_e2e-audit-workload-acme-token"
	awTokenOther = "sbx_e2e-audit-workload-other-token"
	// awCalls is the number of tool calls tenant acme makes.
	awCalls = 1000
	// awToolRoute is the route every tool call here comes in on.
	awToolRoute = "POST /v1/runs/{id}/tools/{name}"
)

// awFamily is the tool family each tool of a run belongs to, for the log.
var awFamily = map[string]string{
	"read": "files", "write": "files", "edit": "files", "apply_patch": "files",
	"shell": "shell", "process": "process", "lsp": "lsp", "lsp_rename": "lsp",
	"ast_grep": "structural", "ast_edit": "structural", "resolve": "structural",
	"eval": "eval", "debug": "debug", "ask_user": "questions",
}

// TestAuditWorkloadEveryFamily runs 1,000 tool calls of one tenant over
// every tool family a run sees (with a question answered by a person, a
// write denied by one, a call that fails and one with bad arguments), the
// sandbox's lifecycle verbs and a preview link, next to a second tenant's
// few calls; then checks the record as a compliance reviewer would: one
// tool record per call, one API record per other request, one event per
// lifecycle change, no file content or command in the files, neither
// tenant seeing the other's records; and `sandboxd audit verify` passing
// on the files, then naming a record edited, one removed and two swapped.
func TestAuditWorkloadEveryFamily(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 to run against the Docker engine")
	}
	began := time.Now()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	// The harness reads DATA_DIR/token: make it acme's.
	if err := os.WriteFile(filepath.Join(data, "token"), []byte(awTokenAcme+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Small files, so that the chain crosses several of them.
	cfg := fmt.Sprintf("tenants:\n  - {name: acme, token_sha256: %s}\n  - {name: other, token_sha256: %s}\naudit: {max_file_bytes: 65536, retention: 1000}\n",
		api.HashToken(awTokenAcme), api.HashToken(awTokenOther))
	cfgPath := filepath.Join(dir, "sandboxd.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "docker", data, "--config", cfgPath)
	acme := d.Client
	other, err := client.New(d.URL, awTokenOther)
	if err != nil {
		t.Fatal(err)
	}
	// What is written into files and commands: it must never reach the
	// record.
	var rnd [8]byte
	rand.Read(rnd[:])
	marker := "awmarker" + hex.EncodeToString(rnd[:])

	// Every non-tool request acme makes, by route: one API record each.
	apis := map[string]int{}
	sb, err := acme.CreateSandbox(ctx(t), createReq("docker", "conv-aw"))
	if err != nil {
		t.Fatal(err)
	}
	apis["POST /v1/sandboxes"]++
	run, err := acme.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-aw", Space: "aw-desk"})
	if err != nil {
		t.Fatal(err)
	}
	ask, err := acme.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-aw", Space: "aw-desk", Approval: "ask"})
	if err != nil {
		t.Fatal(err)
	}
	apis["POST /v1/runs"] += 2
	for tool := range awFamily {
		if !slices.Contains(toolNames(run.Tools), tool) {
			t.Fatalf("the run does not see %s: %v", tool, toolNames(run.Tools))
		}
	}

	w := &awWorkload{t: t, c: acme, calls: map[string]int{}}
	w.families(run.ID, marker)

	// A question answered by a person connected to the run's space, and a
	// write of the approval run denied by them.
	events, hang := human(t, acme, "aw-desk")
	w.count("ask_user")
	tc := callAsync(d, acme, run.ID, "ask_user", map[string]any{"question": "Go on with the audit workload?",
		"options": []map[string]string{{"label": "yes"}, {"label": "no"}}})
	q := nextCard(t, events)
	if _, err := acme.AnswerQuestion(ctx(t), q.ID, api.Answer{Choices: []int{1}}); err != nil {
		t.Fatal(err)
	}
	if out, isErr := tc.wait(t); isErr || !strings.Contains(out, "1. yes") {
		t.Fatalf("ask_user answered yes: %q (is_error %v)", out, isErr)
	}
	w.count("write")
	tc = callAsync(d, acme, ask.ID, "write", map[string]any{"path": "denied.txt", "content": marker})
	q = nextCard(t, events)
	if _, err := acme.AnswerQuestion(ctx(t), q.ID, api.Answer{Choices: []int{3}}); err != nil { // 3: deny
		t.Fatal(err)
	}
	if out, isErr := tc.wait(t); !isErr {
		t.Fatalf("a denied write ran: %q", out)
	}
	apis["POST /v1/questions/{id}/answer"] += 2
	hang()
	apis["GET /v1/spaces/{space}/questions"]++
	// The failed call: the denied write wrote nothing to read.
	if _, err := w.do(run.ID, "read", map[string]any{"path": "denied.txt"}); err == nil {
		t.Fatal("the file of a denied write can be read")
	}
	if _, err := w.do(run.ID, "write", map[string]any{"nonsense": true}); err == nil {
		t.Fatal("a write with bad arguments succeeded")
	}

	// A preview link made and revoked; the sandbox paused and resumed.
	p := createPreview(t, d, sb.ID, map[string]any{"port": 3000})
	if code, body := do(t, authed(t, d, "DELETE", "/v1/sandboxes/"+sb.ID+"/previews/"+p.ID, nil)); code != 204 {
		t.Fatalf("revoke: %d %s", code, body)
	}
	apis["POST /v1/sandboxes/{id}/previews"]++
	apis["DELETE /v1/sandboxes/{id}/previews/{preview}"]++
	if _, err := acme.PauseSandbox(ctx(t), sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := acme.ResumeSandbox(ctx(t), sb.ID); err != nil {
		t.Fatal(err)
	}
	apis["POST /v1/sandboxes/{id}/pause"]++
	apis["POST /v1/sandboxes/{id}/resume"]++

	// Tenant other: a sandbox, a run and a few calls.
	osb, err := other.CreateSandbox(ctx(t), createReq("docker", "conv-aw"))
	if err != nil {
		t.Fatal(err)
	}
	// The harness deletes what acme's token lists when the test fails
	// early; other's sandbox is this test's to delete.
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		other.DeleteSandbox(c, osb.ID)
	})
	orun, err := other.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-aw"})
	if err != nil {
		t.Fatal(err)
	}
	ow := &awWorkload{t: t, c: other, calls: map[string]int{}}
	for i := range 2 {
		ow.must(orun.ID, "write", map[string]any{"path": fmt.Sprintf("o%d.txt", i), "content": "other's"})
		ow.must(orun.ID, "read", map[string]any{"path": fmt.Sprintf("o%d.txt", i)}, "other's")
		ow.must(orun.ID, "shell", map[string]any{"command": "true"})
	}

	// The rest of acme's thousand: files and shell from four callers at once.
	familiesDone := time.Now()
	w.bulk(run.ID, marker, awCalls-w.total(), 4)
	if w.total() != awCalls {
		t.Fatalf("the workload made %d calls, not %d", w.total(), awCalls)
	}
	perFamily := map[string]int{}
	for tool, n := range w.calls {
		perFamily[awFamily[tool]] += n
	}
	t.Logf("%d tool calls by family %v, by tool %v; the bulk took %v", w.total(), perFamily, w.calls, time.Since(familiesDone).Round(time.Millisecond))

	// The record as acme sees it: a tool record per call, an API record
	// per other request, an event per lifecycle change. Requests are
	// recorded as they end: wait for the last ones.
	wantEvents := map[string]int{"sandbox.created": 1, "sandbox.paused": 1, "sandbox.resumed": 1, "run.created": 2,
		"question.asked": 2, "question.answered": 2, "preview.created": 1, "preview.revoked": 1}
	var recs []audit.Record
	waitFor(t, 30*time.Second, "acme's records", func() error {
		recs = awAudit(t, d.URL, awTokenAcme, "")
		return awTally(recs, w.calls, apis, wantEvents)
	})
	w.checkRecords(recs, awIDs{sandbox: sb.ID, run: run.ID, ask: ask.ID, preview: p.ID})

	// A tenant never sees another's records.
	orecs := awAudit(t, d.URL, awTokenOther, "")
	if err := awTally(orecs, ow.calls, map[string]int{"POST /v1/sandboxes": 1, "POST /v1/runs": 1},
		map[string]int{"sandbox.created": 1, "run.created": 1}); err != nil {
		t.Errorf("other's records: %v", err)
	}
	for _, r := range orecs {
		if r.Tenant != "other" || r.Sandbox == sb.ID || r.Run == run.ID || r.Run == ask.ID {
			t.Errorf("tenant other sees a record not its own: %+v", r)
		}
	}
	for _, r := range recs {
		if r.Tenant != "acme" || r.Sandbox == osb.ID || r.Run == orun.ID {
			t.Errorf("tenant acme sees a record not its own: %+v", r)
		}
	}
	for _, query := range []string{"&sandbox=" + sb.ID, "&run=" + run.ID, "&run=" + ask.ID} {
		if got := awAudit(t, d.URL, awTokenOther, query); len(got) != 0 {
			t.Errorf("tenant other asking for acme's %s gets %d records, the first %+v", query, len(got), got[0])
		}
	}
	// A filter narrows to what it names: the approval run's records.
	askRecs := awAudit(t, d.URL, awTokenAcme, "&run="+ask.ID)
	kinds := map[string]int{}
	for _, r := range askRecs {
		if r.Run != ask.ID {
			t.Errorf("?run=%s answers a record of another run: %+v", ask.ID, r)
		}
		kinds[r.Kind+" "+r.Action]++
	}
	if want := "map[api POST /v1/runs:1 event question.answered:1 event question.asked:1 event run.created:1 tool write:1]"; fmt.Sprint(kinds) != want {
		t.Errorf("the approval run's records: %v, want %s", kinds, want)
	}

	// No file content, command or token in the files themselves.
	auditDir := filepath.Join(data, "audit")
	files, _ := filepath.Glob(filepath.Join(auditDir, "audit-*.jsonl"))
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{marker, awTokenAcme, awTokenOther} {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("the audit file %s holds %q, written into a file, a command or a token", filepath.Base(f), secret)
			}
		}
	}

	if err := acme.DeleteSandbox(ctx(t), sb.ID); err != nil {
		t.Fatal(err)
	}
	if err := other.DeleteSandbox(ctx(t), osb.ID); err != nil {
		t.Fatal(err)
	}
	d.stop()
	awTamper(t, auditDir)
	t.Logf("the test took %v", time.Since(began).Round(time.Millisecond))
}

// awWorkload makes one tenant's tool calls and counts them by tool.
type awWorkload struct {
	t     *testing.T
	c     *client.Client
	mu    sync.Mutex // guards calls
	calls map[string]int
}

func (w *awWorkload) count(tool string) {
	w.mu.Lock()
	w.calls[tool]++
	w.mu.Unlock()
}

func (w *awWorkload) total() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, c := range w.calls {
		n += c
	}
	return n
}

// do calls a tool and counts the call; is_error comes back as an error.
// It is safe from any goroutine.
func (w *awWorkload) do(run, tool string, args any) (string, error) {
	w.count(tool)
	raw, err := json.Marshal(args)
	if err != nil {
		return "", err
	}
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := w.c.CallTool(c, run, tool, raw)
	if err != nil {
		return "", err
	}
	if res.IsError {
		return "", errors.New(res.Text())
	}
	return res.Text(), nil
}

// must calls a tool that must succeed with an answer holding each of want.
func (w *awWorkload) must(run, tool string, args any, want ...string) string {
	w.t.Helper()
	out, err := w.do(run, tool, args)
	if err != nil {
		w.t.Fatalf("%s %v: %v", tool, args, err)
	}
	for _, s := range want {
		if !strings.Contains(out, s) {
			w.t.Fatalf("%s %v: the answer lacks %q:\n%s", tool, args, s, out)
		}
	}
	return out
}

// families makes real calls of every tool family but the questions.
func (w *awWorkload) families(run, marker string) {
	t := w.t
	// lsp: gopls on a small module, warmed by its first answers.
	fx := toolstest.Fixture{
		"calc/go.mod": "module example.com/calc\n\ngo 1.26\n",
		"calc/add.go": "package calc\n\n// Add sums two ints.\nfunc Add(a, b int) int { return a + b }\n",
		"calc/use.go": "package calc\n\nfunc Twice(x int) int { return Add(x, x) }\n",
	}
	for _, name := range []string{"calc/go.mod", "calc/add.go", "calc/use.go"} {
		w.must(run, "write", map[string]any{"path": name, "content": fx[name]})
	}
	useLine, addLine := fx.Line(t, "calc/use.go", "return Add(x, x)"), fx.Line(t, "calc/add.go", "func Add(")
	waitFor(t, 60*time.Second, "gopls's first definition", func() error {
		out, err := w.do(run, "lsp", map[string]any{"action": "definition", "file": "calc/use.go", "line": useLine, "symbol": "Add"})
		if err == nil && !strings.Contains(out, "func Add(a, b int) int") {
			err = fmt.Errorf("definition = %q", out)
		}
		return err
	})
	w.must(run, "lsp", map[string]any{"action": "hover", "file": "calc/use.go", "line": useLine, "symbol": "Add"}, "Add sums two ints.")
	w.must(run, "lsp", map[string]any{"action": "references", "file": "calc/add.go", "line": addLine, "symbol": "Add"}, "func Twice(")
	w.must(run, "lsp", map[string]any{"action": "symbols", "file": "calc/add.go"}, "Add")
	w.must(run, "lsp_rename", map[string]any{"file": "calc/add.go", "line": addLine, "symbol": "Add", "new_name": "Sum"}, `renamed "Add" to "Sum"`)
	w.must(run, "read", map[string]any{"path": "calc/use.go"}, "return Sum(x, x)")

	// Structural search, a rewrite prepared and accepted.
	w.must(run, "ast_grep", map[string]any{"pattern": "func $F($$$ARGS) int { $$$BODY }", "path": "calc", "language": "go"}, "2 matches")
	out := w.must(run, "ast_edit", map[string]any{"pattern": "return a + b", "rewrite": "return b + a", "path": "calc/add.go"}, "edit_id: ")
	id := regexp.MustCompile(`(?m)^edit_id: (\S+)`).FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("no edit_id in %q", out)
	}
	w.must(run, "resolve", map[string]any{"edit_id": id[1], "action": "accept"})
	w.must(run, "read", map[string]any{"path": "calc/add.go"}, "return b + a")

	// Eval in both languages.
	w.must(run, "eval", evalArgs("python", "20 + 22"), "42")
	w.must(run, "eval", evalArgs("javascript", "6 * 7"), "42")

	// Processes: a long one listed and killed, a short one waited for.
	started := regexp.MustCompile(`started (p\d+)`)
	long := started.FindStringSubmatch(w.must(run, "process", map[string]any{"action": "start", "command": "sleep 300"}, "state: running"))
	if long == nil {
		t.Fatal("no process id in the start's answer")
	}
	w.must(run, "process", map[string]any{"action": "list"}, long[1])
	w.must(run, "process", map[string]any{"action": "signal", "id": long[1], "signal": "KILL"}, "killed by SIGKILL")
	short := started.FindStringSubmatch(w.must(run, "process", map[string]any{"action": "start", "command": "echo " + marker}))
	if short == nil {
		t.Fatal("no process id in the start's answer")
	}
	w.must(run, "process", map[string]any{"action": "wait", "id": short[1], "timeout_s": 30}, "exited 0")

	// A short debugpy session: stopped at a breakpoint, an expression
	// evaluated in the frame, ended.
	const calc = "def double(v):\n    r = v * 2\n    return r\n\nprint('double', double(21))\n"
	w.must(run, "debug", map[string]any{"operation": "adapters"}, "debugpy")
	w.must(run, "write", map[string]any{"path": "requirements.txt", "content": ""})
	w.must(run, "write", map[string]any{"path": "calc.py", "content": calc})
	w.must(run, "debug", map[string]any{"operation": "breakpoints", "file": "calc.py", "lines": []int{toolstest.LineOf(t, calc, "return r")}})
	w.must(run, "debug", map[string]any{"operation": "launch", "program": "calc.py"}, "Stopped: breakpoint")
	w.must(run, "debug", map[string]any{"operation": "evaluate", "expression": "r + 1"}, "= 43")
	w.must(run, "debug", map[string]any{"operation": "terminate"}, "Terminated")
}

// bulk makes n calls of the file tools and shell from callers goroutines,
// each on files of its own: write, read, edit, apply_patch, shell, again.
// The marker is in every file's content and every command.
func (w *awWorkload) bulk(run, marker string, n, callers int) {
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for g := range callers {
		mine := n / callers
		if g < n%callers {
			mine++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range mine {
				f := fmt.Sprintf("bulk/%d-%d.txt", g, k/5)
				tag := fmt.Sprintf("%s %d-%d", marker, g, k/5)
				var tool string
				var args map[string]any
				want := ""
				switch k % 5 {
				case 0:
					tool, args = "write", map[string]any{"path": f, "content": "alpha " + tag + "\n"}
				case 1:
					tool, args, want = "read", map[string]any{"path": f}, "alpha "+tag
				case 2:
					tool, args = "edit", map[string]any{"path": f, "old": "alpha " + tag, "new": "beta " + tag}
				case 3:
					patch := fmt.Sprintf("--- a/%s\n+++ b/%s\n@@ -1 +1 @@\n-beta %s\n+gamma %s\n", f, f, tag, tag)
					tool, args = "apply_patch", map[string]any{"patch": patch}
				case 4:
					tool, args, want = "shell", map[string]any{"command": fmt.Sprintf("grep -c 'gamma %s' %s", tag, f)}, "1"
				}
				out, err := w.do(run, tool, args)
				if err == nil && !strings.Contains(out, want) {
					err = fmt.Errorf("the answer lacks %q: %s", want, out)
				}
				if err != nil {
					errs <- fmt.Errorf("caller %d, call %d (%s): %w", g, k, tool, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		w.t.Fatal(err)
	}
}

// awTally compares the records' counts by kind and action with the tool
// calls, API requests and events expected.
func awTally(recs []audit.Record, tools, apis, evs map[string]int) error {
	got := map[string]map[string]int{audit.KindTool: {}, audit.KindAPI: {}, audit.KindEvent: {}}
	for _, r := range recs {
		if got[r.Kind] == nil {
			return fmt.Errorf("a record of kind %q: %+v", r.Kind, r)
		}
		got[r.Kind][r.Action]++
	}
	for kind, want := range map[string]map[string]int{audit.KindTool: tools, audit.KindAPI: apis, audit.KindEvent: evs} {
		if fmt.Sprint(got[kind]) != fmt.Sprint(want) {
			return fmt.Errorf("%s records %v, want %v", kind, got[kind], want)
		}
	}
	return nil
}

// awIDs are what acme's records name.
type awIDs struct{ sandbox, run, ask, preview string }

// checkRecords checks what each of acme's records says.
func (w *awWorkload) checkRecords(recs []audit.Record, ids awIDs) {
	t := w.t
	tok := audit.TokenID(awTokenAcme)
	outcomes := map[string]int{}
	questionRuns := map[string]int{}
	for _, r := range recs {
		if r.Tenant != "acme" || r.Kind != audit.KindEvent && r.TokenID != tok {
			t.Errorf("a record of acme's with the wrong tenant or token id: %+v", r)
		}
		switch r.Kind {
		case audit.KindTool:
			outcomes[r.Outcome]++
			if r.Approval != "" && (r.Approval != "denied" || r.Run != ids.ask || r.Action != "write" || r.Outcome != "tool_error") {
				t.Errorf("an approval's record: %+v", r)
			}
			if r.Run == ids.ask && r.Approval != "denied" {
				t.Errorf("the approval run's write does not say it was denied: %+v", r)
			}
			if r.Run != ids.run && r.Run != ids.ask || r.Sandbox != ids.sandbox || r.Conversation != "conv-aw" ||
				r.Route != awToolRoute || r.Level == "" || r.ArgsSHA256 == "" || r.ArgsBytes == 0 || r.RequestID == "" {
				t.Errorf("a tool record lacks what it should say: %+v", r)
			}
		case audit.KindAPI:
			if r.Status == 0 || r.Outcome != "ok" || r.RequestID == "" {
				t.Errorf("an API record: %+v", r)
			}
			if strings.Contains(r.Action, "/v1/sandboxes") && r.Sandbox != ids.sandbox {
				t.Errorf("a record of a request on the sandbox does not name it: %+v", r)
			}
			if r.Action == "POST /v1/runs" && (r.Run != ids.run && r.Run != ids.ask || r.Sandbox != ids.sandbox) {
				t.Errorf("a run's create record does not name the run and its sandbox: %+v", r)
			}
		case audit.KindEvent:
			switch r.Action {
			case "sandbox.created", "sandbox.paused", "sandbox.resumed":
				if r.Sandbox != ids.sandbox {
					t.Errorf("a sandbox event does not name the sandbox: %+v", r)
				}
			case "run.created":
				if r.Run != ids.run && r.Run != ids.ask {
					t.Errorf("a run event does not name the run: %+v", r)
				}
			case "question.asked", "question.answered":
				questionRuns[r.Action+" "+r.Run]++
				if !strings.HasPrefix(r.Detail, "question ") || r.Action == "question.answered" && r.Outcome != "answered" {
					t.Errorf("a question event: %+v", r)
				}
			case "preview.created", "preview.revoked":
				if r.Sandbox != ids.sandbox || r.Detail != "preview "+ids.preview+": port 3000" {
					t.Errorf("a preview event does not name the sandbox and the link: %+v", r)
				}
			}
		}
	}
	if want := map[string]int{"ok": awCalls - 3, "tool_error": 2, "invalid_arguments": 1}; fmt.Sprint(outcomes) != fmt.Sprint(want) {
		t.Errorf("tool outcomes %v, want %v (the denied write and the failed read: tool_error)", outcomes, want)
	}
	wantQ := map[string]int{"question.asked " + ids.run: 1, "question.answered " + ids.run: 1, "question.asked " + ids.ask: 1, "question.answered " + ids.ask: 1}
	if fmt.Sprint(questionRuns) != fmt.Sprint(wantQ) {
		t.Errorf("question events by run %v, want %v", questionRuns, wantQ)
	}
}

// awAudit reads every record a token sees through GET /v1/audit, a page of
// 100 at a time, leaving out the reads of the record. query is added to
// each page's URL ("&run=..."). A refusal (4xx) of a query is an empty
// answer.
func awAudit(t *testing.T, base, token, query string) []audit.Record {
	t.Helper()
	recs, status := auditPagesAt(t, base, token, strings.TrimPrefix(query, "&"), 100)
	if status != http.StatusOK && query == "" {
		t.Fatalf("GET /v1/audit at %s: %d", base, status)
	}
	return recs
}

// awTamper runs `sandboxd audit verify` on the stopped daemon's files,
// then on copies with one record edited, one removed and two swapped:
// each is named by file, line and seq.
func awTamper(t *testing.T, dir string) {
	t.Helper()
	all := readAuditDir(t, dir)
	out, code := verify(t, dir)
	files, _ := filepath.Glob(filepath.Join(dir, "audit-*.jsonl"))
	sort.Strings(files)
	whole := fmt.Sprintf("the audit chain of %d records (seq 1 to %d, in %d files) is whole", len(all), len(all), len(files))
	if code != 0 || !strings.Contains(out, whole) || len(files) < 3 {
		t.Fatalf("audit verify on the untouched record: exit %d: %s; want %q over several files", code, out, whole)
	}
	t.Log(strings.TrimSpace(out))

	// The changes are made in a file in the middle of the chain.
	name := filepath.Base(files[len(files)/2])
	seqAt := func(lines [][]byte, n int) uint64 {
		var r audit.Record
		if err := json.Unmarshal(lines[n-1], &r); err != nil {
			t.Fatalf("%s line %d: %v", name, n, err)
		}
		return r.Seq
	}
	cases := []struct {
		what   string
		change func(lines [][]byte) ([][]byte, string)
	}{
		{"a record edited", func(lines [][]byte) ([][]byte, string) {
			// The first record of acme's from line 5 on moves to tenant other.
			for n := 5; n < len(lines)-1; n++ {
				if bytes.Contains(lines[n-1], []byte(`"tenant":"acme"`)) {
					lines[n-1] = bytes.Replace(lines[n-1], []byte(`"tenant":"acme"`), []byte(`"tenant":"other"`), 1)
					return lines, fmt.Sprintf("the record seq %d at %s line %d was changed", seqAt(lines, n), name, n)
				}
			}
			t.Fatalf("%s has no record of acme's to edit", name)
			return nil, ""
		}},
		{"a record removed", func(lines [][]byte) ([][]byte, string) {
			const n = 10
			s := seqAt(lines, n)
			return slices.Delete(lines, n-1, n), fmt.Sprintf("the record seq %d was removed: it is missing between seq %d (%s line %d) and seq %d (%s line %d)",
				s, s-1, name, n-1, s+1, name, n)
		}},
		{"two records swapped", func(lines [][]byte) ([][]byte, string) {
			const n = 15
			s := seqAt(lines, n)
			lines[n-1], lines[n] = lines[n], lines[n-1]
			return lines, fmt.Sprintf("the record seq %d at %s line %d was reordered: it comes before seq %d, which is further on", s+1, name, n, s)
		}},
	}
	for _, c := range cases {
		cp := t.TempDir()
		want := ""
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if filepath.Base(f) == name {
				var lines [][]byte
				lines, want = c.change(bytes.Split(b, []byte("\n")))
				b = bytes.Join(lines, []byte("\n"))
			}
			if err := os.WriteFile(filepath.Join(cp, filepath.Base(f)), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		out, code := verify(t, cp)
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("audit verify with %s: exit %d: %s; want it to say %q", c.what, code, out, want)
		} else {
			t.Logf("%s: %s", c.what, strings.TrimSpace(out))
		}
	}
}
