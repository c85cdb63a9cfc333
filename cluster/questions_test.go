package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/api/apitest"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/questions"
	"github.com/sandboxd/sandboxd/tools"
)

const (
	qNamespace  = "sandboxd"
	qDeployment = "test"
	humanToken  = "token-of-tenant-a"
	peerSecret  = "0123456789abcdef0123456789abcdef" // MinPeerKey bytes
)

// replica is one sandboxd replica: the real API with a real question port
// behind a Router, its member lease written by a real Owners.
type replica struct {
	id     string
	url    string
	port   *questions.Port
	owners *Owners
	signer *Signer
}

func newReplica(t *testing.T, ctx context.Context, cs *fake.Clientset, id string) *replica {
	t.Helper()
	tok, err := api.ParseTenantToken("a", api.HashToken(humanToken))
	if err != nil {
		t.Fatal(err)
	}
	port := questions.New(questions.WithHeartbeat(50 * time.Millisecond))
	srv := httptest.NewUnstartedServer(nil)
	t.Cleanup(srv.Close)
	t.Cleanup(port.Close) // first: it ends the streams srv.Close waits for
	rp := &replica{id: id, url: "http://" + srv.Listener.Addr().String(), port: port}
	rp.signer, err = NewSigner([]byte(peerSecret), id)
	if err != nil {
		t.Fatal(err)
	}
	rp.owners = NewOwners(cs, Options{Namespace: qNamespace, Deployment: qDeployment, Self: Peer{Identity: id, URL: rp.url},
		LeaseDuration: time.Minute, RenewInterval: time.Second})
	next := api.New(apitest.New(), tools.NewRegistry(), api.NewTokenAuth(tok), api.WithQuestions(port))
	srv.Config.Handler = NewRouter(next, RouterOptions{Owners: rp.owners, Forwarder: NewForwarder(rp.signer, nil, nil), Signer: rp.signer, MaxBody: 1 << 20})
	srv.Start()
	if err := rp.owners.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return rp
}

// addMember writes a live member lease for a replica that is not one of
// ours (one that is down or hangs).
func addMember(t *testing.T, cs *fake.Clientset, id, url string) {
	t.Helper()
	now := metav1.NewMicroTime(time.Now())
	secs := int32(60)
	_, err := cs.CoordinationV1().Leases(qNamespace).Create(context.Background(), &coordv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: MemberLeaseName(qDeployment, id),
			Labels:      map[string]string{LabelDeployment: qDeployment, LabelKind: KindReplica},
			Annotations: map[string]string{AnnotationPeerURL: url}},
		Spec: coordv1.LeaseSpec{HolderIdentity: &id, LeaseDurationSeconds: &secs, RenewTime: &now},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func seesPeers(t *testing.T, rp *replica, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("replica %s sees %d replicas", rp.id, n), func() bool { return len(rp.owners.Peers()) == n })
}

type reply struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, method, url, token, body string, sign func(*http.Request)) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if sign != nil {
		sign(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(b)}
}

func list(t *testing.T, rp *replica, space string) []questions.Question {
	t.Helper()
	a := do(t, "GET", rp.url+"/v1/spaces/"+space+"/questions", humanToken, "", nil)
	if a.status != 200 {
		t.Fatalf("list on %s: %d %s", rp.id, a.status, a.body)
	}
	var qs []questions.Question
	if err := json.Unmarshal([]byte(a.body), &qs); err != nil {
		t.Fatalf("list on %s: %v: %s", rp.id, err, a.body)
	}
	return qs
}

// block is one SSE block as a client reads it.
type block struct {
	lines []string
	event string
	data  string
}

// stream is a human's SSE stream on a replica.
type stream struct {
	t      *testing.T
	blocks chan block
	seen   []block
	cancel context.CancelFunc
	ended  chan struct{}
}

func openStream(t *testing.T, rp *replica, space string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", rp.url+"/v1/spaces/"+space+"/questions", nil)
	req.Header.Set("Authorization", "Bearer "+humanToken)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("stream on %s: %d %q", rp.id, resp.StatusCode, ct)
	}
	s := &stream{t: t, blocks: make(chan block, 64), cancel: cancel, ended: make(chan struct{})}
	go func() {
		defer close(s.ended)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		var b block
		for sc.Scan() {
			line := sc.Text()
			if line != "" {
				b.lines = append(b.lines, line)
				if v, ok := strings.CutPrefix(line, "event: "); ok {
					b.event = v
				}
				if v, ok := strings.CutPrefix(line, "data: "); ok {
					b.data = v
				}
				continue
			}
			if len(b.lines) > 0 {
				select {
				case s.blocks <- b:
				case <-ctx.Done():
					return
				}
			}
			b = block{}
		}
	}()
	return s
}

// next returns the next block that ok accepts, within a deadline.
func (s *stream) next(what string, ok func(block) bool) block {
	s.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case b := <-s.blocks:
			s.seen = append(s.seen, b)
			if ok(b) {
				return b
			}
		case <-s.ended:
			s.t.Fatalf("the stream ended while waiting for %s; saw %v", what, s.seen)
		case <-deadline:
			s.t.Fatalf("timed out waiting for %s on the stream; saw %v", what, s.seen)
		}
	}
}

func (s *stream) question(text string) questions.Question {
	s.t.Helper()
	var q questions.Question
	s.next("question "+strconv.Quote(text), func(b block) bool {
		return b.event == "question" && json.Unmarshal([]byte(b.data), &q) == nil && q.Question == text
	})
	return q
}

func (s *stream) resolved(id string) questions.Resolution {
	s.t.Helper()
	var r questions.Resolution
	s.next("resolution of "+id, func(b block) bool {
		return b.event == "resolved" && json.Unmarshal([]byte(b.data), &r) == nil && r.ID == id
	})
	return r
}

func (s *stream) count(line string) int {
	n := 0
	for _, b := range s.seen {
		for _, l := range b.lines {
			if l == line {
				n++
			}
		}
	}
	return n
}

type asked struct {
	r   questions.Resolution
	err error
}

// ask raises a question on a replica's port, as a run served there does.
func ask(p *questions.Port, space, text string, expiry time.Duration) <-chan asked {
	ch := make(chan asked, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, r, err := p.Ask(ctx, "a", questions.Question{Space: space, Run: "run_1", Kind: questions.KindQuestion, Question: text,
			Options: []questions.Option{{Label: "yes"}, {Label: "no"}}}, expiry)
		ch <- asked{r, err}
	}()
	return ch
}

func result(t *testing.T, ch <-chan asked) asked {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("the asking tool call did not return")
		return asked{}
	}
}

func twoReplicas(t *testing.T) (*fake.Clientset, *replica, *replica) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cs := fake.NewClientset()
	a, b := newReplica(t, ctx, cs, "r1"), newReplica(t, ctx, cs, "r3")
	seesPeers(t, a, 2)
	seesPeers(t, b, 2)
	return cs, a, b
}

func TestQuestionsReachEveryReplica(t *testing.T) {
	_, a, b := twoReplicas(t)

	// Bad credentials get the API's response, not merged into anything.
	if r := do(t, "GET", a.url+"/v1/spaces/s1/questions", "wrong", "", nil); r.status != 401 {
		t.Fatalf("list with a bad token: %d %s", r.status, r.body)
	}

	// A human watches on r1: the space counts as connected on r3 too.
	s := openStream(t, a, "s1")
	s.next("the preamble", func(b block) bool { return b.lines[0] == "retry: 2000" })
	eventually(t, "space s1 is connected on both replicas", func() bool { return a.port.Connected("a", "s1") && b.port.Connected("a", "s1") })
	if b.port.Connected("a", "s2") {
		t.Fatal("another space is connected")
	}

	// A run on r3 asks; the card reaches the human on r1.
	remote := ask(b.port, "s1", "deploy to prod?", 0)
	rq := s.question("deploy to prod?")
	if len(rq.Options) != 2 || rq.ID == "" {
		t.Fatalf("card %+v", rq)
	}
	// A run on r1 asks too, expiring first: it heads the listing.
	local := ask(a.port, "s1", "run the migration?", time.Minute)
	lq := s.question("run the migration?")
	qs := list(t, a, "s1")
	if len(qs) != 2 || qs[0].ID != lq.ID || qs[1].ID != rq.ID {
		t.Fatalf("r1's listing: %+v", qs)
	}
	if qs := list(t, b, "s1"); len(qs) != 2 {
		t.Fatalf("r3's listing: %+v", qs)
	}

	// Answers posted on r1 reach r3's waiting call; errors come back whole.
	answerURL := a.url + "/v1/questions/" + rq.ID + "/answer"
	if r := do(t, "POST", answerURL, humanToken, `{"choices":[3]}`, nil); r.status != 400 || !strings.Contains(r.body, "1 to 2") {
		t.Fatalf("out-of-range answer: %d %s", r.status, r.body)
	}
	var ar api.AnswerResult
	if r := do(t, "POST", answerURL, humanToken, `{"choices":[2]}`, nil); r.status != 200 || json.Unmarshal([]byte(r.body), &ar) != nil || ar.Status != "answered" {
		t.Fatalf("answer: %d %s", r.status, r.body)
	}
	if got := result(t, remote); got.err != nil || got.r.Status != questions.StatusAnswered || len(got.r.Choices) != 1 || got.r.Choices[0] != 2 {
		t.Fatalf("r3's call got %+v", got)
	}
	if r := s.resolved(rq.ID); r.Status != questions.StatusAnswered {
		t.Fatalf("resolution %+v", r)
	}
	if r := do(t, "POST", answerURL, humanToken, `{"choices":[1]}`, nil); r.status != 409 {
		t.Fatalf("second answer: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", a.url+"/v1/questions/q_nope/answer", humanToken, `{"choices":[1]}`, nil); r.status != 404 || !strings.Contains(r.body, "q_nope") {
		t.Fatalf("unknown question: %d %s", r.status, r.body)
	}
	// The local question is answered locally, posted to r3 this time.
	if r := do(t, "POST", b.url+"/v1/questions/"+lq.ID+"/answer", humanToken, `{"skip":true}`, nil); r.status != 200 {
		t.Fatalf("answer of r1's question on r3: %d %s", r.status, r.body)
	}
	if got := result(t, local); got.err != nil || got.r.Status != questions.StatusSkipped {
		t.Fatalf("r1's call got %+v", got)
	}
	s.resolved(lq.ID)

	// Heartbeats are the local stream's; r3's preamble never reaches the human.
	s.next("a heartbeat", func(b block) bool { return b.lines[0] == ": heartbeat" })
	if n := s.count(": connected"); n != 1 {
		t.Fatalf("%d preambles on the merged stream, want 1: %v", n, s.seen)
	}

	// The human leaves: no replica counts the space as connected, so a
	// run on r3 that asks is told at once.
	s.cancel()
	eventually(t, "space s1 is disconnected on both replicas", func() bool { return !a.port.Connected("a", "s1") && !b.port.Connected("a", "s1") })
	if got := result(t, ask(b.port, "s1", "anyone?", 0)); !errors.Is(got.err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("ask with nobody connected: %+v", got)
	}
}

func TestForwardedQuestionRequests(t *testing.T) {
	_, a, b := twoReplicas(t)
	s := openStream(t, a, "s1")
	eventually(t, "space s1 is connected on r3", func() bool { return b.port.Connected("a", "s1") })
	remote := ask(b.port, "s1", "deploy?", 0)
	q := s.question("deploy?")

	listURL := a.url + "/v1/spaces/s1/questions"
	answerURL := a.url + "/v1/questions/" + q.ID + "/answer"
	// A peer asking r1 for its part gets r1's questions only: none.
	if r := do(t, "GET", listURL, humanToken, "", func(r *http.Request) { b.signer.Sign(r, a.id) }); r.status != 200 || strings.TrimSpace(r.body) != "[]" {
		t.Fatalf("forwarded list: %d %s", r.status, r.body)
	}
	// ...and an answer forwarded to r1 is not passed on again.
	if r := do(t, "POST", answerURL, humanToken, `{"choices":[1]}`, func(r *http.Request) { b.signer.Sign(r, a.id) }); r.status != 404 {
		t.Fatalf("forwarded answer: %d %s", r.status, r.body)
	}

	other, err := NewSigner([]byte(strings.Repeat("x", MinPeerKey)), b.id)
	if err != nil {
		t.Fatal(err)
	}
	forgeries := map[string]func(*http.Request){
		"made-up headers": func(r *http.Request) {
			r.Header.Set(HeaderForwardedBy, b.id)
			r.Header.Set(HeaderForwardTo, a.id)
			r.Header.Set(HeaderForwardTime, strconv.FormatInt(time.Now().UnixMilli(), 10))
			r.Header.Set(HeaderForwardSig, "bm90IGEgc2lnbmF0dXJl")
		},
		"another key":     func(r *http.Request) { other.Sign(r, a.id) },
		"another replica": func(r *http.Request) { b.signer.Sign(r, b.id) },
	}
	for name, forge := range forgeries {
		if r := do(t, "GET", listURL, humanToken, "", forge); r.status != 403 {
			t.Errorf("list with %s: %d %s", name, r.status, r.body)
		}
		if r := do(t, "POST", answerURL, humanToken, `{"choices":[1]}`, forge); r.status != 403 {
			t.Errorf("answer with %s: %d %s", name, r.status, r.body)
		}
	}
	select {
	case got := <-remote:
		t.Fatalf("a refused answer resolved the question: %+v", got)
	default:
	}
	if qs := list(t, a, "s1"); len(qs) != 1 || qs[0].ID != q.ID {
		t.Fatalf("the question is no longer open: %+v", qs)
	}
}

func TestDownPeerDoesNotStopQuestions(t *testing.T) {
	cs, a, b := twoReplicas(t)

	// r2-down refuses connections; r2-hung accepts and never responds.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downURL := "http://" + ln.Addr().String()
	ln.Close()
	stop := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(hung.Close)
	t.Cleanup(func() { close(stop) })
	addMember(t, cs, "r2-down", downURL)
	addMember(t, cs, "r2-hung", hung.URL)
	seesPeers(t, a, 4)

	s := openStream(t, a, "s1")
	eventually(t, "space s1 is connected on both replicas", func() bool { return a.port.Connected("a", "s1") && b.port.Connected("a", "s1") })
	local := ask(a.port, "s1", "local?", time.Minute)
	lq := s.question("local?")
	remote := ask(b.port, "s1", "remote?", 0)
	rq := s.question("remote?")

	start := time.Now()
	qs := list(t, a, "s1")
	if took := time.Since(start); took > peerQuestionsTimeout+time.Second {
		t.Errorf("the listing took %s with a hung replica", took)
	}
	if len(qs) != 2 || qs[0].ID != lq.ID || qs[1].ID != rq.ID {
		t.Fatalf("listing with replicas down: %+v", qs)
	}

	// r3 is asked after the two that fail.
	if r := do(t, "POST", a.url+"/v1/questions/"+rq.ID+"/answer", humanToken, `{"choices":[1]}`, nil); r.status != 200 {
		t.Fatalf("answer past replicas down: %d %s", r.status, r.body)
	}
	if got := result(t, remote); got.err != nil || got.r.Status != questions.StatusAnswered {
		t.Fatalf("r3's call got %+v", got)
	}
	s.resolved(rq.ID)
	// The stream outlives several attempts at the failing replicas.
	time.Sleep(2*peerRelist + 500*time.Millisecond)
	if r := do(t, "POST", a.url+"/v1/questions/"+lq.ID+"/answer", humanToken, `{"choices":[2]}`, nil); r.status != 200 {
		t.Fatalf("local answer: %d %s", r.status, r.body)
	}
	if got := result(t, local); got.err != nil || got.r.Choices[0] != 2 {
		t.Fatalf("r1's call got %+v", got)
	}
	s.resolved(lq.ID)
	s.next("a heartbeat", func(b block) bool { return b.lines[0] == ": heartbeat" })
}

func TestReadBlock(t *testing.T) {
	big := "data: " + strings.Repeat("x", 100) + "\n\n"
	long := "event: question\ndata: " + strings.Repeat("y", 30) + "\r\n\r\n"
	in := "retry: 2000\n: connected\n\n\n: heartbeat\n\n" + big + long + "event: resolved\ndata: {}\n\nevent: question\ndata: cut"
	br := bufio.NewReaderSize(strings.NewReader(in), 16) // lines longer than the buffer
	want := []struct {
		block string
		err   error
		event bool
	}{
		{"retry: 2000\n: connected\n\n", nil, false},
		{": heartbeat\n\n", nil, false}, // the stray blank line before it is no block
		{"", errBlockTooBig, false},
		{long, nil, true},
		{"event: resolved\ndata: {}\n\n", nil, true},
		{"", io.EOF, false}, // a block the stream ends in is dropped
	}
	for i, w := range want {
		b, err := readBlock(br, 64)
		if string(b) != w.block || !errors.Is(err, w.err) {
			t.Fatalf("block %d: %q, %v; want %q, %v", i, b, err, w.block, w.err)
		}
		if err == nil && isEvent(b) != w.event {
			t.Fatalf("block %d: isEvent %v", i, !w.event)
		}
	}
}

func TestPeerStreamIsReopenedWhileListed(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cs := fake.NewClientset()
	a := newReplica(t, ctx, cs, "r1")

	// A peer whose stream ends after one event (the first time after an
	// event too large to relay), checking that it is asked as a peer.
	fakeSigner, err := NewSigner([]byte(peerSecret), "r2-fake")
	if err != nil {
		t.Fatal(err)
	}
	var opened atomic.Int32
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fwd, err := fakeSigner.Verify(r); !fwd || err != nil || r.Header.Get("Authorization") != "Bearer "+humanToken || r.Header.Get("Accept") != "text/event-stream" {
			t.Errorf("the peer got %s %s forwarded=%v (%v) with headers %v", r.Method, r.URL, fwd, err, r.Header)
			http.Error(w, "not a peer's stream request", http.StatusBadRequest)
			return
		}
		n := opened.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "retry: 2000\n: connected\n\n: heartbeat\n\n")
		if n == 1 {
			fmt.Fprintf(w, "event: question\ndata: {\"id\":\"q_big\",\"question\":%q}\n\n", strings.Repeat("z", maxSSEBlock))
		}
		fmt.Fprintf(w, "event: question\ndata: {\"id\":\"q_fake%d\",\"question\":\"stream %d\"}\n\n", n, n)
	}))
	t.Cleanup(peer.Close)
	addMember(t, cs, "r2-fake", peer.URL)
	seesPeers(t, a, 2)

	s := openStream(t, a, "s1")
	s.question("stream 1")
	s.question("stream 2")
	for _, b := range s.seen {
		if strings.Contains(b.data, "q_big") {
			t.Fatal("an event larger than the cap was relayed")
		}
	}
	if n := s.count(": connected"); n != 1 {
		t.Fatalf("%d preambles on the merged stream, want 1", n)
	}

	// Once the peer is no longer listed, its stream is not reopened.
	if err := cs.CoordinationV1().Leases(qNamespace).Delete(ctx, MemberLeaseName(qDeployment, "r2-fake"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	seesPeers(t, a, 1)
	n := opened.Load()
	time.Sleep(2*peerRelist + 500*time.Millisecond)
	if m := opened.Load(); m > n+1 {
		t.Fatalf("the peer's stream was opened %d more times after it left", m-n)
	}

	// The local stream ending ends the human's stream.
	a.port.Close()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case <-s.blocks: // heartbeats sent before the end
		case <-s.ended:
			return
		case <-deadline:
			t.Fatal("the merged stream outlived the local one")
		}
	}
}
