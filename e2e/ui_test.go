package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sandboxd/sandboxd/api"
)

// chromiumPath finds Debian's chromium (scripts/install-browser.sh installs
// it). Where the full suite runs (SANDBOXD_TEST_DOCKER=1) a missing browser
// is a failure, elsewhere a skip.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("SANDBOXD_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if _, err := exec.LookPath(p); err == nil {
			return p
		}
	}
	if os.Getenv("SANDBOXD_TEST_DOCKER") == "1" {
		t.Fatal("chromium is not installed; run scripts/install-browser.sh (apt-get install chromium)")
	}
	t.Skip("chromium is not installed (scripts/install-browser.sh installs it); the console's browser test needs it")
	return ""
}

func artifactsDir(t *testing.T) string {
	if d := os.Getenv("SANDBOXD_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err == nil {
			return d
		}
	}
	return t.TempDir()
}

// browser starts headless chromium with a fresh profile and returns a tab.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1100, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, cancelTab := chromedp.NewContext(actx)
	bounded, cancelTimeout := context.WithTimeout(tab, 3*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancelTab()
		cancelAlloc() // kills and reaps the browser
	})
	// Start the browser now, so a launch failure is reported as such.
	if err := chromedp.Do(bounded); err != nil {
		t.Fatalf("chromium did not start: %v", err)
	}
	return bounded
}

// TestConsoleAnswersBlockedQuestion drives the web console in a real
// browser: sign in, open the space, see the card a blocked ask_user call
// waits on, click an option, and check the call returned that option.
func TestConsoleAnswersBlockedQuestion(t *testing.T) {
	tab := browser(t)
	d, _ := qDaemon(t, "")
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-ui", Space: "ui-desk"})
	if err != nil {
		t.Fatal(err)
	}

	err = chromedp.Do(tab,
		chromedp.Navigate(d.URL+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), qTokenA),
		chromedp.Click(chromedp.CSS("#signin-form button")),
		chromedp.WaitVisible(chromedp.CSS("#console")),
		chromedp.SendKeys(chromedp.CSS("#space"), "ui-desk"),
		chromedp.Click(chromedp.CSS("#space-form button")),
		chromedp.WaitVisible(chromedp.CSS("#stream-state.live")),
	)
	if err != nil {
		t.Fatalf("signing in and opening the space: %v\n%s", err, d.logs.String())
	}
	state, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS("#stream-state")))
	if err != nil {
		t.Fatalf("signing in and opening the space: %v\n%s", err, d.logs.String())
	}
	if !strings.Contains(state, "connected") {
		t.Fatalf("stream state %q", state)
	}

	// The page's stream is what makes the space connected: ask now.
	tc := callAsync(d, d.Client, run.ID, "ask_user", map[string]any{
		"question": "Which branch should the release be cut from?",
		"context":  "main has two unreviewed commits",
		"options":  []map[string]string{{"label": "main"}, {"label": "release-1.4", "description": "the stabilised branch"}, {"label": "wait"}},
	})
	if err := chromedp.Do(tab, chromedp.WaitVisible(chromedp.CSS(`#cards .card .option[data-choice="2"]`))); err != nil {
		t.Fatalf("the card did not appear: %v", err)
	}
	cardText, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS("#cards .card")))
	if err != nil {
		t.Fatal(err)
	}
	href, err := chromedp.Run(tab, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	shot, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(artifactsDir(t), "ui-question.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	for _, want := range []string{"Which branch should the release be cut from?", "main has two unreviewed commits", "2. release-1.4", "the stabilised branch", run.ID} {
		if !strings.Contains(cardText, want) {
			t.Fatalf("card text %q lacks %q", cardText, want)
		}
	}
	// The card reads as body text with a bold heading, not as one big
	// heading.
	styles, err := chromedp.Run(tab, chromedp.Evaluate[map[string]float64](`(() => {
		const cs = (el) => getComputedStyle(el);
		const card = document.querySelector('#cards .card');
		const prompt = card.querySelector('.prompt'), desc = card.querySelector('.desc');
		return {
			body: parseFloat(cs(document.body).fontSize),
			card: parseFloat(cs(card).fontSize), cardWeight: Number(cs(card).fontWeight),
			descWeight: Number(cs(desc).fontWeight),
			prompt: parseFloat(cs(prompt).fontSize), promptWeight: Number(cs(prompt).fontWeight),
		};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if styles["card"] != styles["body"] || styles["cardWeight"] != 400 || styles["descWeight"] != 400 {
		t.Errorf("the question card's text is %vpx weight %v (descriptions weight %v), want the body's %vpx at weight 400",
			styles["card"], styles["cardWeight"], styles["descWeight"], styles["body"])
	}
	if styles["promptWeight"] < 600 || styles["prompt"] <= styles["body"] {
		t.Errorf("the card's heading is %vpx weight %v, want bold and larger than the body's %vpx", styles["prompt"], styles["promptWeight"], styles["body"])
	}
	who, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS("#who")))
	if err != nil || who != "tenant a" {
		t.Errorf("the header names %q (%v), want tenant a", who, err)
	}
	if strings.Contains(href, qTokenA) {
		t.Fatalf("the token is in the page's URL: %s", href)
	}

	if err := chromedp.Do(tab, chromedp.Click(chromedp.CSS(`#cards .card .option[data-choice="2"]`))); err != nil {
		t.Fatal(err)
	}
	out, isErr := tc.wait(t)
	if isErr || !strings.Contains(out, "2. release-1.4") {
		t.Fatalf("ask_user returned %q (is_error %v), want option 2", out, isErr)
	}
	// The card leaves the page once answered.
	if err := chromedp.Do(tab, chromedp.WaitVisible(chromedp.CSS("#no-cards"))); err != nil {
		t.Fatalf("the answered card stayed: %v", err)
	}

	// Multi-select with free text, through the checkboxes and the text box.
	tc = callAsync(d, d.Client, run.ID, "ask_user", map[string]any{
		"question": "Which checks should block the merge?", "multi_select": true, "allow_free_text": true,
		"options": []map[string]string{{"label": "unit"}, {"label": "lint"}, {"label": "e2e"}},
	})
	if err := chromedp.Do(tab, chromedp.WaitVisible(chromedp.CSS(`#cards .card input.choice[value="3"]`))); err != nil {
		t.Fatal(err)
	}
	// One button sends what the card says: the ticks and the text.
	sends, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#cards .card button')]
		.filter((b) => b.offsetParent !== null && /send/i.test(b.textContent)).map((b) => b.textContent)`))
	if err != nil || len(sends) != 1 || sends[0] != "Send" {
		t.Fatalf("the multi-select card shows the send buttons %q (%v), want one Send", sends, err)
	}
	err = chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(`#cards .card input.choice[value="1"]`)),
		chromedp.Click(chromedp.CSS(`#cards .card input.choice[value="3"]`)),
		chromedp.SendKeys(chromedp.CSS(`#cards .card .free-text`), "and the benchmarks"),
		chromedp.Click(chromedp.CSS(`#cards .card button.send`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	out, isErr = tc.wait(t)
	if isErr || !strings.Contains(out, "1. unit") || !strings.Contains(out, "3. e2e") || strings.Contains(out, "lint") || !strings.Contains(out, "and the benchmarks") {
		t.Fatalf("ask_user returned %q (is_error %v)", out, isErr)
	}

	// A permission card from an "ask" run, approved from the console.
	sb, err := d.Client.CreateSandbox(ctx(t), createReq("host", "conv-ui"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(context.Background(), sb.ID) })
	askRun, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-ui", Space: "ui-desk", Approval: "ask"})
	if err != nil {
		t.Fatal(err)
	}
	tc = callAsync(d, d.Client, askRun.ID, "write", map[string]any{"path": "approved.txt", "content": "ok"})
	if err := chromedp.Do(tab, chromedp.WaitVisible(chromedp.CSS(`#cards .card.kind-permission .option[data-choice="1"]`))); err != nil {
		t.Fatalf("the permission card did not appear: %v", err)
	}
	perm, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS("#cards .card.kind-permission")))
	if err != nil || !strings.Contains(perm, "Allow once") || !strings.Contains(perm, "Allow for this run") || !strings.Contains(perm, "Deny") || !strings.Contains(perm, "approved.txt") {
		t.Fatalf("permission card %q (%v)", perm, err)
	}
	if shot, err := chromedp.Run(tab, chromedp.FullScreenshot(100)); err == nil {
		os.WriteFile(filepath.Join(artifactsDir(t), "ui-permission.png"), shot, 0o644)
	}
	if err := chromedp.Do(tab, chromedp.Click(chromedp.CSS(`#cards .card.kind-permission .option[data-choice="1"]`))); err != nil {
		t.Fatal(err)
	}
	if out, isErr := tc.wait(t); isErr {
		t.Fatalf("the approved write failed: %q", out)
	}
	if got := mustCall(t, d, askRun.ID, "read", map[string]any{"path": "approved.txt"}); !strings.Contains(got, "ok") {
		t.Fatalf("read = %q", got)
	}

	// The overview lists the tenant's runs.
	err = chromedp.Do(tab,
		chromedp.Click(chromedp.CSS("#refresh")),
		chromedp.WaitVisible(chromedp.CSS("#runs tbody tr")),
	)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS("#runs tbody")))
	if err != nil || !strings.Contains(runs, run.ID) {
		t.Fatalf("runs table %q (%v) lacks %s", runs, err, run.ID)
	}
}
