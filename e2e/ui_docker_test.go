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

// TestConsoleOnDocker: on the Docker backend the sandbox table shows the
// sandbox's resource use read from the engine (a memory figure), and a
// write that introduces a compile error shows its new diagnostics in the
// call view. With SANDBOXD_CONSOLE_PICTURE=path it also saves the picture
// of the console the README shows (a run, its calls and an open question).
func TestConsoleOnDocker(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 to run against the Docker engine")
	}
	tab := browser(t)
	d := startDaemon(t, "docker", t.TempDir())
	sb, err := d.Client.CreateSandbox(ctx(t), createReq("docker", "release-notes"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(context.Background(), sb.ID) })
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "release-notes", Space: "desk"})
	if err != nil {
		t.Fatal(err)
	}
	mustCall(t, d, run.ID, "shell", map[string]any{"command": "go version"})

	signInConsole(t, tab, d, d.Token)
	err = chromedp.Do(tab,
		chromedp.SendKeys(chromedp.CSS("#space"), "desk"),
		chromedp.Click(chromedp.CSS("#space-form button")),
		chromedp.WaitVisible(chromedp.CSS("#stream-state.live")),
	)
	if err != nil {
		t.Fatal(err)
	}
	// The stats refresh fills the sandbox's row within a few seconds.
	mem, err := chromedp.Run(tab, chromedp.Poll[string](`(() => {
		const td = document.querySelector('#sandboxes tbody tr[data-id="`+sb.ID+`"] .stat-mem');
		return td && /\d/.test(td.textContent) ? td.textContent : null;
	})()`, chromedp.WithPollingTimeout(2*time.Minute), chromedp.WithPollingInterval(500*time.Millisecond)))
	if err != nil {
		t.Fatalf("the sandbox's memory use did not show: %v\n%s", err, d.logs.String())
	}
	if !regexp.MustCompile(`^\d+(\.\d)? (KiB|MiB|GiB)( / \d+(\.\d)? (MiB|GiB))?$`).MatchString(mem) {
		t.Errorf("memory cell %q, want a figure such as 12.3 MiB / 4.0 GiB", mem)
	}
	row, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#sandboxes tbody tr[data-id="`+sb.ID+`"] td')].map((td) => td.textContent)`))
	if err != nil || len(row) != 8 || row[3] != "running" || !strings.HasSuffix(row[5], " %") || !regexp.MustCompile(`^\d+$`).MatchString(row[7]) {
		t.Errorf("sandbox row %q (%v), want running with CPU %% and pids", row, err)
	}

	watchCalls(t, tab, run.ID)
	mustCall(t, d, run.ID, "write", map[string]any{"path": "go.mod", "content": "module notes\n\ngo 1.22\n"})
	mustCall(t, d, run.ID, "write", map[string]any{"path": "main.go", "content": "package main\n\nfunc main() {\n\tfmt.Println(\"release notes\")\n}\n"})
	diag, err := chromedp.Run(tab, chromedp.Poll[string](`(() => {
		const td = document.querySelector('#call-log tbody tr[data-seq="3"] td.diagnostics');
		return td ? td.textContent : null;
	})()`, chromedp.WithPollingTimeout(time.Minute)))
	if err != nil {
		t.Fatalf("the write of main.go did not show: %v", err)
	}
	if !regexp.MustCompile(`^[1-9]\d* new$`).MatchString(diag) {
		t.Errorf("the write that breaks main.go shows diagnostics %q, want its new problems counted", diag)
	}
	mustCall(t, d, run.ID, "read", map[string]any{"path": "main.go"})

	tc := callAsync(d, d.Client, run.ID, "ask_user", map[string]any{
		"question": "main.go does not build (fmt is not imported). Fix it before cutting the release?",
		"options":  []map[string]string{{"label": "Fix it", "description": "add the import and rebuild"}, {"label": "Cut anyway"}},
	})
	err = chromedp.Do(tab,
		chromedp.WaitVisible(chromedp.CSS(`#cards .card .option[data-choice="1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#call-log tbody tr[data-seq="4"]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	if path := os.Getenv("SANDBOXD_CONSOLE_PICTURE"); path != "" {
		// Let the refresh catch up, and drop the highlight of fresh rows.
		chromedp.Run(tab, chromedp.Evaluate[bool](`refreshStats().then(() => {
			document.querySelectorAll('.fresh').forEach((e) => e.classList.remove('fresh'));
			return true;
		})`, chromedp.EvalAwaitPromise))
		shot, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if shot, err := chromedp.Run(tab, chromedp.FullScreenshot(100)); err == nil {
		os.WriteFile(filepath.Join(artifactsDir(t), "ui-docker.png"), shot, 0o644)
	}
	if err := chromedp.Do(tab, chromedp.Click(chromedp.CSS(`#cards .card .option[data-choice="1"]`))); err != nil {
		t.Fatal(err)
	}
	if out, isErr := tc.wait(t); isErr || !strings.Contains(out, "Fix it") {
		t.Fatalf("ask_user returned %q (is_error %v)", out, isErr)
	}
}
