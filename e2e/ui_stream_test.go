package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/sandboxd/sandboxd/api"
)

// TestConsoleStreamsToolOutput drives the console's tool call pane in a
// real browser: a shell call's first line shows while the command still
// runs (the result is not there yet), then stderr in its own colour, then
// the result.
func TestConsoleStreamsToolOutput(t *testing.T) {
	tab := browser(t)
	d := startDaemon(t, "host", t.TempDir())
	sb, err := d.Client.CreateSandbox(ctx(t), createReq("host", "conv-ui-call"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(context.Background(), sb.ID) })
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-ui-call"})
	if err != nil {
		t.Fatal(err)
	}
	err = chromedp.Do(tab,
		chromedp.Navigate(d.URL+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), d.Token),
		chromedp.Click(chromedp.CSS("#signin-form button")),
		chromedp.WaitVisible(chromedp.CSS("#call-form")),
		chromedp.SendKeys(chromedp.CSS("#call-run"), run.ID),
		chromedp.SendKeys(chromedp.CSS("#call-tool"), "shell"),
		chromedp.SetValue(chromedp.CSS("#call-args"), `{"command": "echo first; sleep 3; echo second >&2"}`),
		chromedp.Click(chromedp.CSS("#call-go")),
		chromedp.WaitVisible(chromedp.CSS("#call-output span")),
	)
	if err != nil {
		t.Fatalf("calling shell from the console: %v\n%s", err, d.logs.String())
	}
	// Read output and result in one go: the first line is there and the
	// result is not, so the line was shown while the command ran.
	early, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.querySelector('#call-output').textContent + '|' + document.querySelector('#call-result').textContent`))
	if err != nil {
		t.Fatal(err)
	}
	if early != "first\n|" {
		t.Fatalf("while the call ran the page showed %q, want the first line and no result", early)
	}
	if err := chromedp.Do(tab, chromedp.WaitVisible(chromedp.CSS("#call-output span.stderr"))); err != nil {
		t.Fatalf("stderr did not show: %v", err)
	}
	err = chromedp.Do(tab, chromedp.WaitVisible(chromedp.CSS("#call-result:not(:empty)")))
	if err != nil {
		t.Fatalf("the call did not finish on the page: %v", err)
	}
	result, err := chromedp.Run(tab, chromedp.TextContent(chromedp.CSS("#call-result")))
	if err != nil || !strings.Contains(result, "exit status 0") || !strings.Contains(result, "second") {
		t.Fatalf("result %q (%v)", result, err)
	}
	if shot, err := chromedp.Run(tab, chromedp.FullScreenshot(100)); err == nil {
		path := filepath.Join(artifactsDir(t), "ui-tool-call.png")
		os.WriteFile(path, shot, 0o644)
		t.Logf("screenshot: %s", path)
	}
}
