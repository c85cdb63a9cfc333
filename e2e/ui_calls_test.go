package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sandboxd/sandboxd/api"
)

// signInConsole opens the console and signs in with token.
func signInConsole(t *testing.T, tab context.Context, d *daemon, token string) {
	t.Helper()
	err := chromedp.Do(tab,
		chromedp.Navigate(d.URL+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("#signin-form button")),
		chromedp.WaitVisible(chromedp.CSS("#console")),
	)
	if err != nil {
		t.Fatalf("signing in to the console: %v\n%s", err, d.logs.String())
	}
}

// watchCalls clicks the run's Watch button and waits until its call
// stream is live.
func watchCalls(t *testing.T, tab context.Context, runID string) {
	t.Helper()
	// The tables are drawn again by their refreshes, so the button is found
	// and clicked in one step in the page (a node found first and clicked
	// later may be gone by then).
	err := chromedp.Do(tab, chromedp.Click(chromedp.CSS("#refresh")))
	if err == nil {
		_, err = chromedp.Run(tab, chromedp.Poll[bool](`(() => {
			const b = document.querySelector('#runs tbody tr[data-id="`+runID+`"] button.watch');
			if (!b) return null;
			b.click();
			return true;
		})()`, chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(200*time.Millisecond)))
	}
	if err == nil {
		err = chromedp.Do(tab, chromedp.WaitVisible(chromedp.CSS("#calls-state.live")))
	}
	if err != nil {
		t.Fatalf("watching the run's calls: %v", err)
	}
}

// TestConsoleShowsCallsLive: a run's tool calls made after the page opened
// show in its call view as they finish, with a short form of the
// arguments that never shows the written file's content, the duration,
// the outcome and a readable time.
func TestConsoleShowsCallsLive(t *testing.T) {
	tab := browser(t)
	d := startDaemon(t, "host", t.TempDir())
	sb, err := d.Client.CreateSandbox(ctx(t), createReq("host", "conv-ui-calls"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(context.Background(), sb.ID) })
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-ui-calls"})
	if err != nil {
		t.Fatal(err)
	}
	mustCall(t, d, run.ID, "shell", map[string]any{"command": "echo before"})
	signInConsole(t, tab, d, d.Token)
	watchCalls(t, tab, run.ID)
	// The call made before the page opened is the backlog.
	if err := chromedp.Do(tab, chromedp.WaitVisible(chromedp.CSS(`#call-log tbody tr[data-seq="1"]`))); err != nil {
		t.Fatalf("the earlier call is not listed: %v", err)
	}

	mustCall(t, d, run.ID, "write", map[string]any{"path": "notes/secret.txt", "content": "API_KEY=sk-live-do-not-show"})
	if err := chromedp.Do(tab, chromedp.WaitVisible(chromedp.CSS(`#call-log tbody tr[data-seq="2"]`))); err != nil {
		t.Fatalf("the call made after the page opened did not show: %v", err)
	}
	row, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#call-log tbody tr[data-seq="2"] td')].map((td) => td.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(row) != 6 {
		t.Fatalf("the call's row %q, want 6 cells", row)
	}
	when, tool, args, dur, outcome := row[0], row[1], row[2], row[3], row[4]
	if tool != "write" || outcome != "ok" || !strings.Contains(args, `path="notes/secret.txt"`) || !strings.Contains(args, "content=<27 bytes>") {
		t.Errorf("the call's row %q, want write, ok, the path and the content's size", row)
	}
	if strings.Contains(strings.Join(row, " "), "sk-live") {
		t.Errorf("the call view shows the written content: %q", row)
	}
	if !regexp.MustCompile(`^(just now|\d+ s ago)$`).MatchString(when) || !regexp.MustCompile(`^(<1 ms|\d+ ms|\d+\.\d s)$`).MatchString(dur) {
		t.Errorf("time %q and duration %q are not readable", when, dur)
	}
	title, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.querySelector('#call-log tbody tr[data-seq="2"] time').title`))
	if err != nil || !regexp.MustCompile(`\d{1,2}:\d{2}`).MatchString(title) {
		t.Errorf("the time's title %q (%v) does not give the local time", title, err)
	}
	// Newest first.
	first, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.querySelector('#call-log tbody tr').dataset.seq`))
	if err != nil || first != "2" {
		t.Errorf("the first row is call %q (%v), want the newest, 2", first, err)
	}
	if shot, err := chromedp.Run(tab, chromedp.FullScreenshot(100)); err == nil {
		path := filepath.Join(artifactsDir(t), "ui-calls.png")
		os.WriteFile(path, shot, 0o644)
		t.Logf("screenshot: %s", path)
	}
}
