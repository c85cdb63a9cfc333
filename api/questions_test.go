package api

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/questions"
)

func TestQuestionEndpoints(t *testing.T) {
	if a := newHarness(t).do("GET", "/v1/spaces/s1/questions", tokenA, ""); a.status != 503 {
		t.Fatalf("without a port: %d %s", a.status, a.body)
	}
	port := questions.New(questions.WithHeartbeat(50 * time.Millisecond))
	h := newHarness(t, WithQuestions(port))
	if a := h.do("GET", "/v1/spaces/bad%20space/questions", tokenA, ""); a.status != 400 {
		t.Fatalf("bad space: %d", a.status)
	}
	var list []Question
	h.must("GET", "/v1/spaces/s1/questions", tokenA, "", 200, &list)
	if len(list) != 0 {
		t.Fatalf("list %+v", list)
	}

	// Open a stream: the space becomes connected and the card arrives.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", h.http.URL+"/v1/spaces/s1/questions", nil)
	req.Header.Set("Authorization", "Bearer "+tokenA)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := h.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("stream: %d %q", resp.StatusCode, ct)
	}
	if !port.Connected("a", "s1") || port.Connected("b", "s1") {
		t.Fatal("the stream must connect tenant a's space only")
	}
	asked := make(chan questions.Resolution, 1)
	go func() {
		_, r, _ := port.Ask(context.Background(), "a", questions.Question{Space: "s1", Run: "r", Kind: questions.KindQuestion, Question: "ok?",
			Options: []questions.Option{{Label: "yes"}, {Label: "no"}}}, 0)
		asked <- r
	}()
	sc := bufio.NewScanner(resp.Body)
	var q Question
	sawHeartbeat := false
	for sc.Scan() {
		line := sc.Text()
		if line == ": heartbeat" {
			sawHeartbeat = true
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			if err := json.Unmarshal([]byte(data), &q); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if q.ID == "" || q.Question != "ok?" || len(q.Options) != 2 {
		t.Fatalf("event %+v", q)
	}
	var raws []map[string]any
	h.must("GET", "/v1/spaces/s1/questions", tokenA, "", 200, &raws)
	if len(raws) != 1 {
		t.Fatalf("pending: %+v", raws)
	}
	raw := raws[0]
	for _, k := range []string{"id", "space", "run", "kind", "question", "context", "options", "allow_free_text", "multi_select", "expires_at"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("question JSON lacks %q: %v", k, raw)
		}
	}

	if a := h.do("POST", "/v1/questions/"+q.ID+"/answer", tokenB, `{"choices":[1]}`); a.status != 404 {
		t.Fatalf("other tenant: %d", a.status)
	}
	if a := h.do("POST", "/v1/questions/"+q.ID+"/answer", tokenA, `{"choices":[3]}`); a.status != 400 || !strings.Contains(a.errBody(t).Message, "1 to 2") {
		t.Fatalf("out of range: %d %s", a.status, a.body)
	}
	if a := h.do("POST", "/v1/questions/"+q.ID+"/answer", tokenA, `{"choices":[1],"extra":1}`); a.status != 400 {
		t.Fatalf("unknown field: %d", a.status)
	}
	var ar AnswerResult
	h.must("POST", "/v1/questions/"+q.ID+"/answer", tokenA, `{"choices":[2]}`, 200, &ar)
	if ar.Status != "answered" || (<-asked).Choices[0] != 2 {
		t.Fatalf("answer %+v", ar)
	}
	if a := h.do("POST", "/v1/questions/"+q.ID+"/answer", tokenA, `{"choices":[1]}`); a.status != 409 {
		t.Fatalf("second answer: %d", a.status)
	}
	for sc.Scan() && !sawHeartbeat {
		sawHeartbeat = sc.Text() == ": heartbeat"
	}
	if !sawHeartbeat {
		t.Fatal("no heartbeat on the stream")
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for port.Connected("a", "s1") {
		if time.Now().After(deadline) {
			t.Fatal("still connected after the stream closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRunTokens(t *testing.T) {
	rt := NewRunTokens()
	h := newHarness(t, WithRunTokens(rt), WithQuestions(questions.New()))
	var own, other Run
	h.must("POST", "/v1/runs", tokenA, `{"conversation":"c1"}`, 201, &own)
	h.must("POST", "/v1/runs", tokenA, `{"conversation":"c2"}`, 201, &other)
	tok, err := rt.Issue("a", own.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/v1/runs/" + own.ID, 200},
		{"GET", "/v1/runs/" + own.ID + "/tools", 200},
		{"POST", "/v1/runs/" + own.ID + "/tools/peek", 200},
		{"GET", "/v1/runs/" + other.ID, 404},
		{"GET", "/v1/runs/" + other.ID + "/tools", 404},
		{"POST", "/v1/runs/" + other.ID + "/tools/peek", 404},
		{"DELETE", "/v1/runs/" + own.ID, 401},
		{"GET", "/v1/runs", 401},
		{"GET", "/v1/sandboxes", 401},
		{"POST", "/v1/runs", 401},
		{"GET", "/v1/spaces/s1/questions", 401},
	} {
		body := ""
		if c.method == "POST" {
			body = `{}`
		}
		if a := h.do(c.method, c.path, tok, body); a.status != c.want {
			t.Errorf("%s %s with a run token: %d, want %d (%s)", c.method, c.path, a.status, c.want, a.body)
		}
	}
	rt.Revoke(own.ID)
	if a := h.do("GET", "/v1/runs/"+own.ID+"/tools", tok, ""); a.status != 401 {
		t.Fatalf("revoked token: %d", a.status)
	}
	var runs []RunSummary
	h.must("GET", "/v1/runs", tokenA, "", 200, &runs)
	if len(runs) != 2 {
		t.Fatalf("runs %+v", runs)
	}
	h.must("GET", "/v1/runs", tokenB, "", 200, &runs)
	if len(runs) != 0 {
		t.Fatalf("tenant b sees %+v", runs)
	}
}

func TestConsoleFiles(t *testing.T) {
	h := newHarness(t)
	for _, p := range []string{"/ui/", "/ui/app.js", "/ui/style.css"} {
		a := h.do("GET", p, "", "")
		if a.status != 200 || !strings.Contains(a.header.Get("Content-Security-Policy"), "default-src 'none'") {
			t.Fatalf("GET %s: %d, CSP %q", p, a.status, a.header.Get("Content-Security-Policy"))
		}
		// Nothing is loaded from outside: no absolute URLs in the console.
		if strings.Contains(string(a.body), "http://") || strings.Contains(string(a.body), "https://") {
			t.Fatalf("%s refers to an outside URL", p)
		}
	}
}
