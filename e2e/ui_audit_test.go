package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/api/client"
	"github.com/sandboxd/sandboxd/audit"
)

// auditHostile is markup that would run script if a page inserted it as
// HTML: a record value is shown as text, so no element is made from it.
const auditHostile = `<img src=x onerror="window.pwned=1">`

// auditPageRow is one record's row on the console's audit page.
type auditPageRow struct {
	Seq   string   `json:"seq"`
	Cells []string `json:"cells"` // time, kind, action, run, sandbox, level, outcome, status, duration, approval, detail
	Title string   `json:"title"`
}

// auditPageState is what the audit page shows once a query has answered.
type auditPageState struct {
	Rows  []auditPageRow `json:"rows"`
	State string         `json:"state"` // the line by Load more
	Error string         `json:"error"`
	Empty bool           `json:"empty"` // the empty state shows
	More  bool           `json:"more"`  // Load more shows
}

func (s auditPageState) column(i int) []string {
	var out []string
	for _, r := range s.Rows {
		out = append(out, r.Cells[i])
	}
	return out
}

// auditRowsJS reads the audit page's record rows as auditPageRows.
const auditRowsJS = `[...document.querySelectorAll('#audit-log tbody tr.audit-row')].map((tr) => ({
	seq: tr.dataset.seq, cells: [...tr.cells].map((td) => td.textContent), title: tr.title }))`

// auditSettled waits until the audit page's query has answered (rows, the
// empty state or an error) and returns what it shows.
func auditSettled(t *testing.T, tab context.Context) auditPageState {
	t.Helper()
	s, err := chromedp.Run(tab, chromedp.Poll[auditPageState](`(() => {
		const st = document.querySelector('#audit-state').textContent;
		const rows = `+auditRowsJS+`;
		const error = document.querySelector('#audit-error').textContent;
		const empty = !document.querySelector('#audit-empty').hidden;
		const more = !document.querySelector('#audit-more').hidden;
		if (st === 'loading…' || (!rows.length && !empty && !error)) return null;
		return { rows, state: st, error, empty, more };
	})()`, chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(100*time.Millisecond)))
	if err != nil {
		t.Fatalf("the audit page did not show an answer: %v", err)
	}
	return s
}

// auditFilter fills the audit page's filters (every one: "" clears it),
// clicks Show and returns the answer shown.
func auditFilter(t *testing.T, tab context.Context, run, since, until, limit string) auditPageState {
	t.Helper()
	v, _ := json.Marshal(map[string]string{"run": run, "sandbox": "", "since": since, "until": until, "limit": limit})
	_, err := chromedp.Run(tab, chromedp.Evaluate[bool](`(() => {
		const v = `+string(v)+`;
		for (const k of Object.keys(v)) document.querySelector('#audit-' + k).value = v[k];
		return true;
	})()`))
	if err == nil {
		err = chromedp.Do(tab, chromedp.Click(chromedp.CSS("#audit-show")))
	}
	if err != nil {
		t.Fatalf("filtering the audit page: %v", err)
	}
	return auditSettled(t, tab)
}

// noMarkupRan fails the test if the hostile values made an element or ran.
func noMarkupRan(t *testing.T, tab context.Context) {
	t.Helper()
	n, err := chromedp.Run(tab, chromedp.Evaluate[int](`document.querySelectorAll('img, [onerror]').length + (window.pwned === undefined ? 0 : 1000)`))
	if err != nil || n != 0 {
		t.Fatalf("a record's value was inserted as markup (%d img or onerror elements, +1000 if its script ran; %v)", n, err)
	}
}

// TestConsoleAuditPage drives the console's audit page in chromium against
// sandboxd (host backend, tenants a and b): tenant a sees its own records
// oldest first with their actions, none of b's; the run filter narrows them
// to one run, Load more follows the cursor a small page at a time to the
// end; since and until, picked in the browser's zone, select by time; a
// record's token id and request id show when its row is opened; values
// that are markup show as text; and a sandboxd without an audit record
// shows the API's sentence.
func TestConsoleAuditPage(t *testing.T) {
	tab := browser(t)
	// Far from UTC and not a whole hour off: a time sent without its zone
	// would select the wrong records.
	ist := time.FixedZone("IST", 5*3600+1800)
	err := chromedp.Do(tab, chromedp.Func(func(c context.Context, tg *chromedp.Target) error {
		return tg.Call(c, "Emulation.setTimezoneOverride", map[string]string{"timezoneId": "Asia/Kolkata"}, nil)
	}))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := qDaemon(t, "")

	// A record whose action and detail are markup, two hours back: written
	// by the audit package into the daemon's files while it is stopped
	// (the chain goes on from it), since no request of today's API puts a
	// tenant's text in those two fields.
	d.stop()
	seeded := time.Now().Add(-2 * time.Hour).UTC()
	l, err := audit.Open(audit.Options{Dir: filepath.Join(d.dataDir, audit.DirName), Replica: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	err = l.Append(audit.Record{Time: seeded, Kind: audit.KindEvent, Tenant: "a", Action: "question.asked " + auditHostile,
		Outcome: "ok", Detail: "question " + auditHostile}, true)
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	d.start()
	b, err := client.New(d.URL, qTokenB)
	if err != nil {
		t.Fatal(err)
	}

	sb, err := d.Client.CreateSandbox(ctx(t), createReq("host", "conv-audit-ui"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(context.Background(), sb.ID) })
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-audit-ui"})
	if err != nil {
		t.Fatal(err)
	}
	mustCall(t, d, run.ID, "shell", map[string]any{"command": "echo one"})
	mustCall(t, d, run.ID, "write", map[string]any{"path": "notes.txt", "content": "audit me"})
	mustCall(t, d, run.ID, "read", map[string]any{"path": "notes.txt"})
	mustCall(t, d, run.ID, "shell", map[string]any{"command": "echo two"})
	runActions := []string{"run.created", "POST /v1/runs", "shell", "write", "read", "shell"}
	other, err := b.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-audit-b"})
	if err != nil {
		t.Fatal(err)
	}
	// A tenant's own text in a record: the run id of a request's path,
	// kept as given by the record of the refused call.
	procHTTP(t, d, "POST", "/v1/runs/"+url.PathEscape(auditHostile)+"/tools/shell", map[string]any{"command": "true"}, nil, 404)
	// Records of requests are appended as they end: wait for them.
	waitFor(t, 30*time.Second, "the workload's records", func() error {
		var tools int
		hostile := false
		for _, r := range auditRecords(t, d) {
			if r.Kind == audit.KindTool && r.Run == run.ID {
				tools++
			}
			hostile = hostile || r.Run == auditHostile
		}
		if tools != 4 || !hostile {
			return fmt.Errorf("%d tool records of the run (want 4), the refused call's record found: %v", tools, hostile)
		}
		return nil
	})

	signInConsole(t, tab, d, qTokenA)
	if off, err := chromedp.Run(tab, chromedp.Evaluate[int](`new Date().getTimezoneOffset()`)); err != nil || off != -330 {
		t.Fatalf("the browser's zone is %d minutes behind UTC (%v), want India's -330", off, err)
	}
	if err := chromedp.Do(tab, chromedp.Click(chromedp.CSS("#nav-audit")), chromedp.WaitVisible(chromedp.CSS("#audit"))); err != nil {
		t.Fatalf("opening the audit page: %v", err)
	}
	if hidden, _ := chromedp.Run(tab, chromedp.Evaluate[bool](`document.querySelector('#overview').hidden`)); !hidden {
		t.Error("the audit page still shows the overview")
	}
	all := auditSettled(t, tab)
	if all.Error != "" || len(all.Rows) == 0 {
		t.Fatalf("the audit page shows error %q and %d rows", all.Error, len(all.Rows))
	}
	actions := all.column(2)
	for _, want := range []string{"question.asked " + auditHostile, "POST /v1/sandboxes", "sandbox.created", "POST /v1/runs", "run.created",
		"shell", "write", "read", "POST /v1/runs/{id}/tools/{name}"} {
		if !slices.Contains(actions, want) {
			t.Errorf("the audit page's actions %q lack %q", actions, want)
		}
	}
	var last int
	for _, r := range all.Rows {
		var seq int
		fmt.Sscan(r.Seq, &seq)
		if seq <= last {
			t.Errorf("record %d is shown after record %d: want oldest first", seq, last)
		}
		last = seq
		if strings.Contains(strings.Join(r.Cells, " "), other.ID) {
			t.Errorf("tenant a's audit page shows tenant b's run %s: %q", other.ID, r.Cells)
		}
	}
	if !strings.Contains(all.State, "oldest first") {
		t.Errorf("the page's line says %q, want the order named", all.State)
	}
	// The markup shows as the text it is, and made no element.
	i := slices.Index(actions, "question.asked "+auditHostile)
	if i >= 0 && all.Rows[i].Cells[10] != "question "+auditHostile {
		t.Errorf("the seeded record's detail shows %q, want %q", all.Rows[i].Cells[10], "question "+auditHostile)
	}
	noMarkupRan(t, tab)
	if shot, err := chromedp.Run(tab, chromedp.FullScreenshot(100)); err == nil {
		os.WriteFile(filepath.Join(artifactsDir(t), "ui-audit.png"), shot, 0o644)
	}

	// One run, two records a page: Load more follows the cursor to the end.
	page := auditFilter(t, tab, run.ID, "", "", "2")
	if got := page.column(2); !slices.Equal(got, runActions[:2]) || !page.More {
		t.Fatalf("the run's first page shows %q (Load more shown: %v), want %q and more", got, page.More, runActions[:2])
	}
	for n := 4; page.More; n += 2 {
		if err := chromedp.Do(tab, chromedp.Click(chromedp.CSS("#audit-more"))); err != nil {
			t.Fatal(err)
		}
		want := min(n, len(runActions))
		page, err = chromedp.Run(tab, chromedp.Poll[auditPageState](`(() => {
			const rows = `+auditRowsJS+`;
			const st = document.querySelector('#audit-state').textContent;
			if (st === 'loading…' || rows.length < `+fmt.Sprint(want)+`) return null;
			return { rows, state: st, error: document.querySelector('#audit-error').textContent, more: !document.querySelector('#audit-more').hidden };
		})()`, chromedp.WithPollingTimeout(30*time.Second)))
		if err != nil || page.Error != "" {
			t.Fatalf("Load more did not show %d rows: %v %q", want, err, page.Error)
		}
		if n > 10 {
			t.Fatalf("Load more still shows after %d rows of a run with %d records", len(page.Rows), len(runActions))
		}
	}
	if got := page.column(2); !slices.Equal(got, runActions) {
		t.Errorf("the run's records through Load more: %q, want %q", got, runActions)
	}
	for _, r := range page.column(3) {
		if r != run.ID {
			t.Errorf("the run filter shows a record of run %q", r)
		}
	}
	if !strings.HasSuffix(page.State, "that is all that match") {
		t.Errorf("after the last page the line says %q", page.State)
	}

	// A row opens to the whole record: the token's id and the request's.
	err = chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(`#audit-log tbody tr.audit-row:nth-child(2)`)),
		chromedp.WaitVisible(chromedp.CSS(`#audit-log tr.audit-record dd[data-field="token_id"]`)),
	)
	if err != nil {
		t.Fatalf("opening a row: %v", err)
	}
	fields, err := chromedp.Run(tab, chromedp.Evaluate[map[string]string](`Object.fromEntries([...document.querySelectorAll('#audit-log tr.audit-record dd')].map((dd) => [dd.dataset.field, dd.textContent]))`))
	if err != nil || fields["token_id"] != audit.TokenID(qTokenA) || fields["request_id"] == "" || fields["run"] != run.ID || fields["args_sha256"] == "" {
		t.Errorf("the opened record shows %v (%v), want token_id %s, a request_id, the run and the arguments' hash", fields, err, audit.TokenID(qTokenA))
	}
	if !strings.Contains(page.Rows[1].Title, audit.TokenID(qTokenA)) {
		t.Errorf("the row's title %q does not name the token's id", page.Rows[1].Title)
	}

	// The refused call's record, found by its markup run id.
	page = auditFilter(t, tab, auditHostile, "", "", "")
	if len(page.Rows) != 1 || page.Rows[0].Cells[2] != "POST /v1/runs/{id}/tools/{name}" || page.Rows[0].Cells[3] != auditHostile ||
		page.Rows[0].Cells[6] != "not_found" || page.Rows[0].Cells[7] != "404" {
		t.Errorf("filtered by the markup run id the page shows %q, want the refused call with the id as text", page.Rows)
	}
	noMarkupRan(t, tab)

	// Since and until, in the browser's zone (India, UTC+5:30).
	hourAgo := time.Now().Add(-time.Hour).In(ist).Format("2006-01-02T15:04:05")
	page = auditFilter(t, tab, "", "", hourAgo, "")
	if got := page.column(2); !slices.Equal(got, []string{"question.asked " + auditHostile}) {
		t.Errorf("until an hour ago the page shows %q, want only the record of two hours ago", got)
	}
	page = auditFilter(t, tab, run.ID, hourAgo, "", "")
	if got := page.column(2); !slices.Equal(got, runActions) {
		t.Errorf("the run since an hour ago shows %q, want %q", got, runActions)
	}
	page = auditFilter(t, tab, "", time.Now().Add(time.Hour).In(ist).Format("2006-01-02T15:04:05"), "", "")
	if len(page.Rows) != 0 || !page.Empty || page.Error != "" {
		t.Errorf("since an hour ahead the page shows %d rows, empty state %v, error %q; want the empty state", len(page.Rows), page.Empty, page.Error)
	}

	// A sandboxd that keeps no record: the page shows the API's sentence.
	off, _ := qDaemon(t, "audit: {disabled: true}\n")
	var answer struct {
		Error struct{ Message string } `json:"error"`
	}
	procHTTP(t, off, "GET", "/v1/audit", nil, &answer, 503)
	signInConsole(t, tab, off, qTokenA)
	if err := chromedp.Do(tab, chromedp.Click(chromedp.CSS("#nav-audit"))); err != nil {
		t.Fatal(err)
	}
	page = auditSettled(t, tab)
	if page.Error == "" || page.Error != answer.Error.Message || page.Empty || len(page.Rows) != 0 {
		t.Errorf("with the record off the page shows error %q (empty state %v, %d rows), want the API's %q", page.Error, page.Empty, len(page.Rows), answer.Error.Message)
	}
}
