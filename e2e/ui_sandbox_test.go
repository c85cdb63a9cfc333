package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/sandboxd/sandboxd/api"
)

// TestConsoleSandboxPage drives a Docker sandbox's page in chromium: a
// process started through the API listed with its live output, a server
// started from the page's form listed under its port with a preview that
// serves its page in a new tab, a kill, and the terminal: typing into
// xterm.js, a window resize that stty sees, and a reload that attaches to
// the same shell with its earlier output.
func TestConsoleSandboxPage(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 to run against the Docker engine")
	}
	tab := browser(t)
	d := startDaemon(t, "docker", t.TempDir())
	sb, err := d.Client.CreateSandbox(ctx(t), createReq("docker", "console-procs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(context.Background(), sb.ID) })
	var ticker api.Process
	procHTTP(t, d, "POST", "/v1/sandboxes/"+sb.ID+"/processes",
		api.StartProcess{Command: "i=0; while [ $i -lt 600 ]; do i=$((i+1)); echo tick-$i; sleep 0.2; done"}, &ticker, http.StatusCreated)

	signInConsole(t, tab, d, d.Token)
	open := `#sandboxes tbody tr[data-id="` + sb.ID + `"] a.open`
	err = chromedp.Do(tab,
		chromedp.WaitVisible(chromedp.CSS(open)),
		chromedp.Click(chromedp.CSS(open)),
		chromedp.WaitVisible(chromedp.CSS("#sandbox")),
		chromedp.WaitVisible(chromedp.CSS(`#procs tbody tr[data-id="`+ticker.ID+`"] button.show-output`)),
	)
	if err != nil {
		t.Fatalf("opening the sandbox's page: %v\n%s", err, d.logs.String())
	}
	if hidden, _ := chromedp.Run(tab, chromedp.Evaluate[bool](`document.querySelector('#overview').hidden`)); !hidden {
		t.Error("the sandbox's page still shows the overview")
	}
	row, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#procs tbody tr[data-id="`+ticker.ID+`"] td')].map((td) => td.textContent)`))
	if err != nil || len(row) != 5 || row[1] != "running" || !strings.Contains(row[2], "echo tick-$i") || !strings.HasSuffix(row[3], "ago") && row[3] != "just now" {
		t.Fatalf("the ticker's row %q (%v), want its id, running, its command and when it started", row, err)
	}

	// Its output, live: later lines arrive while the page watches.
	if err := chromedp.Do(tab, chromedp.Click(chromedp.CSS(`#procs tbody tr[data-id="`+ticker.ID+`"] button.show-output`))); err != nil {
		t.Fatal(err)
	}
	lastTick := func() int {
		txt, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS("#proc-output")))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, m := range regexp.MustCompile(`tick-(\d+)\n`).FindAllStringSubmatch(txt, -1) {
			k, _ := strconv.Atoi(m[1])
			if k != n+1 {
				t.Fatalf("the output shown has a gap or a repeat after tick-%d: tick-%d", n, k)
			}
			n = k
		}
		return n
	}
	var first int
	waitFor(t, 30*time.Second, "the ticker's output on the page", func() error {
		if first = lastTick(); first == 0 {
			return fmt.Errorf("no tick yet")
		}
		return nil
	})
	waitFor(t, 30*time.Second, "more ticks while the page watches", func() error {
		if n := lastTick(); n < first+5 {
			return fmt.Errorf("tick-%d, first seen tick-%d", n, first)
		}
		return nil
	})
	if st, _ := chromedp.Run(tab, chromedp.Text(chromedp.CSS("#proc-view-state"))); st != "live" {
		t.Errorf("the output's state says %q, want live", st)
	}

	// A server started from the page's form: its output, then its port.
	err = chromedp.Do(tab,
		chromedp.SendKeys(chromedp.CSS("#proc-command"), "python3 -u -m http.server 8765"),
		chromedp.Click(chromedp.CSS("#proc-form button")),
	)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the server's first words", func() error {
		txt, _ := chromedp.Run(tab, chromedp.Text(chromedp.CSS("#proc-output")))
		cmd, _ := chromedp.Run(tab, chromedp.Text(chromedp.CSS("#proc-view-cmd")))
		if cmd != "python3 -u -m http.server 8765" || !strings.Contains(txt, "Serving HTTP on") {
			return fmt.Errorf("output of %q: %q", cmd, txt)
		}
		return nil
	})
	port := `#ports tbody tr[data-port="8765"]`
	if err := chromedp.Do(tab, chromedp.WaitVisible(chromedp.CSS(port+" button.preview"))); err != nil {
		t.Fatalf("port 8765 was not listed: %v", err)
	}
	prow, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`[...document.querySelectorAll('`+port+` td')].map((td) => td.textContent)`))
	if err != nil || len(prow) != 4 || prow[0] != "8765" || !strings.Contains(prow[2], "http.server 8765") {
		t.Fatalf("the port's row %q (%v), want 8765 and the python process", prow, err)
	}
	if err := chromedp.Do(tab, chromedp.Click(chromedp.CSS(port+" button.preview"))); err != nil {
		t.Fatal(err)
	}
	link, err := chromedp.Run(tab, chromedp.Poll[string](`(() => { const a = document.querySelector('`+port+` a.preview-link'); return a ? a.href : null; })()`,
		chromedp.WithPollingTimeout(30*time.Second)))
	if err != nil || !strings.HasPrefix(link, d.URL+"/p/") {
		t.Fatalf("the preview's link %q (%v)", link, err)
	}
	// The button opened the link in a new tab, which shows the server's page
	// (http.server lists the workspace) without the token.
	var previewTab context.Context
	closePreview := func() {}
	t.Cleanup(func() { closePreview() })
	waitFor(t, 20*time.Second, "the preview's tab", func() error {
		ts, err := chromedp.Targets(tab)
		if err != nil {
			return err
		}
		for _, ti := range ts {
			if ti.Type == "page" && ti.URL == link {
				c, cancel := chromedp.NewContext(tab, chromedp.WithTargetID(ti.TargetID))
				closePreview = cancel
				previewTab = c
				return nil
			}
		}
		return fmt.Errorf("no tab at %s among %d targets", link, len(ts))
	})
	title, err := chromedp.Run(previewTab, chromedp.Poll[string](`document.readyState === 'complete' && document.body ? document.body.innerText : null`,
		chromedp.WithPollingTimeout(30*time.Second)))
	if err != nil || !strings.Contains(title, "Directory listing for /") {
		t.Fatalf("the preview's tab shows %q (%v), want the server's directory listing", title, err)
	}
	// Back to the console's tab: a tab in the background gets no animation
	// frames, in which xterm.js draws.
	closePreview()
	err = chromedp.Do(tab, chromedp.Func(func(c context.Context, tg *chromedp.Target) error {
		return tg.Call(c, "Page.bringToFront", nil, nil)
	}))
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, plain(t, "GET", link)); code != 200 || !strings.Contains(body, "Directory listing for /") {
		t.Fatalf("GET the preview link without a token: %d %.200s", code, body)
	}

	// Kill from the page.
	err = chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(`#procs tbody tr[data-id="`+ticker.ID+`"] button.kill`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the killed ticker's status", func() error {
		st, _ := chromedp.Run(tab, chromedp.Text(chromedp.CSS(`#procs tbody tr[data-id="`+ticker.ID+`"] td.status`)))
		if !strings.HasPrefix(st, "killed") {
			return fmt.Errorf("status %q", st)
		}
		return nil
	})

	consoleTerminal(t, tab, d)
	if shot, err := chromedp.Run(tab, chromedp.FullScreenshot(100)); err == nil {
		os.WriteFile(filepath.Join(artifactsDir(t), "ui-sandbox.png"), shot, 0o644)
	}
}

// consoleTerminal opens the sandbox page's terminal and types into it, then
// resizes the window and reloads the page.
func consoleTerminal(t *testing.T, tab context.Context, d *daemon) {
	t.Helper()
	if err := chromedp.Do(tab, chromedp.Click(chromedp.CSS("#term-new"))); err != nil {
		t.Fatal(err)
	}
	// The terminal, or the page's sentence why not (a build without xterm.js).
	got, err := chromedp.Run(tab, chromedp.Poll[string](`document.querySelector('#terminal .xterm-rows') ? 'ok' : (document.querySelector('#term-error').textContent || null)`,
		chromedp.WithPollingTimeout(30*time.Second)))
	if err != nil || got != "ok" {
		t.Fatalf("opening the terminal: the page says %q (%v)\n%s", got, err, d.logs.String())
	}
	if err := chromedp.Do(tab, chromedp.WaitVisible(chromedp.CSS("#term-state.live"))); err != nil {
		t.Fatalf("the terminal's output stream: %v", err)
	}
	rendered := func() string {
		s, err := chromedp.Run(tab, chromedp.Evaluate[string](`[...document.querySelectorAll('#terminal .xterm-rows > div')].map((r) => r.textContent).join('\n').replace(/\u00a0/g, ' ')`))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	buffer := func() string {
		s, err := chromedp.Run(tab, chromedp.Evaluate[string](`window.sandboxdTerminal ? window.sandboxdTerminal.text() : ''`))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// Text goes in as typed text (Input.insertText, an input event, which
	// xterm.js takes as typed), Enter as its key. chromedp's SendKeys sends
	// each letter as a keydown and a separate "char" event that xterm.js's
	// cancelled keydown would have suppressed in a browser's own keyboard
	// handling, so the terminal got every letter twice.
	typeLine := func(line string) {
		t.Helper()
		err := chromedp.Do(tab,
			chromedp.Focus(chromedp.CSS("#terminal .xterm-helper-textarea")),
			chromedp.Func(func(c context.Context, tg *chromedp.Target) error {
				for _, r := range line {
					if err := tg.Call(c, "Input.insertText", map[string]string{"text": string(r)}, nil); err != nil {
						return err
					}
				}
				for _, k := range kb.Encode('\r') {
					if k.Type == kb.KeyChar {
						continue
					}
					if err := tg.Call(c, "Input.dispatchKeyEvent", k, nil); err != nil {
						return err
					}
				}
				return nil
			}),
		)
		if err != nil {
			t.Fatalf("typing %q: %v", line, err)
		}
	}
	// A line of its own: the typed command shows "echo hello-term", its output
	// "hello-term" alone.
	outLine := regexp.MustCompile(`(?m)^hello-term\s*$`)
	typeLine("echo hello-term")
	waitFor(t, 20*time.Second, "hello-term in the terminal", func() error {
		if !outLine.MatchString(rendered()) {
			return fmt.Errorf("the terminal shows %q (its buffer %q)", rendered(), buffer())
		}
		return nil
	})
	pid, err := chromedp.Run(tab, chromedp.Evaluate[string](`window.sandboxdTerminal.pid()`))
	if err != nil || pid == "" {
		t.Fatalf("the terminal's process: %q %v", pid, err)
	}

	// stty sees the page's size, before and after the window shrinks.
	sttySize := func() (rows, cols int) {
		t.Helper()
		size := regexp.MustCompile(`(?m)^(\d+) (\d+)\s*$`)
		var want struct{ Rows, Cols int }
		waitFor(t, 20*time.Second, "the terminal's size set", func() error {
			got, err := chromedp.Run(tab, chromedp.Evaluate[map[string]int](`(() => {
				const s = window.sandboxdTerminal.size(), a = window.sandboxdTerminal.applied();
				return a && a.rows === s.rows && a.cols === s.cols ? s : null;
			})()`))
			if err != nil || got == nil {
				return fmt.Errorf("the size is not set yet (%v)", err)
			}
			want.Rows, want.Cols = got["rows"], got["cols"]
			return nil
		})
		before := len(size.FindAllString(buffer(), -1))
		typeLine("stty size")
		waitFor(t, 20*time.Second, "stty size's answer", func() error {
			all := size.FindAllStringSubmatch(buffer(), -1)
			if len(all) <= before {
				return fmt.Errorf("no answer yet")
			}
			rows, _ = strconv.Atoi(all[len(all)-1][1])
			cols, _ = strconv.Atoi(all[len(all)-1][2])
			return nil
		})
		if rows != want.Rows || cols != want.Cols {
			t.Fatalf("stty size says %d %d, the page's terminal is %d %d", rows, cols, want.Rows, want.Cols)
		}
		return rows, cols
	}
	rows, cols := sttySize()
	if rows < 5 || cols < 40 {
		t.Fatalf("the terminal is %d×%d, too small for its box", rows, cols)
	}
	if err := chromedp.Do(tab, chromedp.EmulateViewport(700, 700)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the terminal refitted to the window", func() error {
		got, _ := chromedp.Run(tab, chromedp.Evaluate[map[string]int](`window.sandboxdTerminal.size()`))
		if got["cols"] >= cols {
			return fmt.Errorf("still %v", got)
		}
		return nil
	})
	rows2, cols2 := sttySize()
	if cols2 >= cols {
		t.Fatalf("after the window shrank stty says %d %d, before %d %d", rows2, cols2, rows, cols)
	}

	// A reload attaches to the same shell and shows what it printed before.
	typeLine("echo before-$((6*7))-reload")
	waitFor(t, 20*time.Second, "the line before the reload", func() error {
		if !strings.Contains(buffer(), "before-42-reload") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	err = chromedp.Do(tab,
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS("#terminal .xterm-rows")),
		chromedp.WaitVisible(chromedp.CSS("#term-state.live")),
	)
	if err != nil {
		t.Fatalf("reloading the page: %v", err)
	}
	waitFor(t, 20*time.Second, "the earlier output after the reload", func() error {
		b := buffer()
		if !outLine.MatchString(b) || !strings.Contains(b, "before-42-reload") {
			return fmt.Errorf("the terminal shows %q", b)
		}
		return nil
	})
	again, err := chromedp.Run(tab, chromedp.Evaluate[string](`window.sandboxdTerminal.pid()`))
	if err != nil || again != pid {
		t.Fatalf("after the reload the terminal is process %q (%v), want the same %s", again, err, pid)
	}
	typeLine("echo after-$((6*7))-reload")
	waitFor(t, 20*time.Second, "typing after the reload", func() error {
		if !strings.Contains(rendered(), "after-42-reload") {
			return fmt.Errorf("the terminal shows %q", rendered())
		}
		return nil
	})
}
