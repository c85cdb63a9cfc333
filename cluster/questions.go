package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/api"
)

// Questions live in memory on the replica that serves the run asking them
// (package questions), but a human watches and answers a space on
// whichever replica the load balancer picked. So on the question
// endpoints the Router gathers: a listing is this replica's questions plus
// every live peer's, a stream is this replica's stream merged with one
// stream from each peer, and an answer this replica does not know is
// tried at the peers. Each peer stream is a subscription on that peer's
// port, so while a human watches on one replica the space counts as
// connected on every replica, and ask_user works wherever the run is.
//
// A request forwarded by a peer asks for this replica's part only and is
// served locally.

const (
	// peerQuestionsTimeout bounds a peer's response to a listing or an
	// answer, and the wait for a peer stream's header: a slow peer is left
	// out rather than holding the human's request.
	peerQuestionsTimeout = 2 * time.Second
	// peerRelist is how often the peers are listed again while a stream
	// is open, and how long a peer stream that ended waits to reopen.
	peerRelist = 2 * time.Second
	// maxQuestionList caps one replica's listing (200 questions per space
	// fit many times over); a larger one is not merged.
	maxQuestionList = 16 << 20
	// maxAnswerBody caps an answer's body and the replies to it.
	maxAnswerBody = 1 << 20
	// maxSSEBlock caps one event of a stream; a larger one is dropped.
	maxSSEBlock = 1 << 20
	// sseQueue is how many events wait for the client's writer.
	sseQueue = 16
	// sseWriteTimeout bounds one write to the client's stream, like the
	// API's own: a client that stopped reading is cut off.
	sseWriteTimeout = 10 * time.Second
	// streamStopWait bounds the wait for a stream's goroutines once it ends.
	streamStopWait = 5 * time.Second
)

// otherPeers returns the live replicas other than this one.
func (rt *Router) otherPeers() []Peer {
	self := rt.owners.o.Self.Identity
	return slices.DeleteFunc(rt.owners.Peers(), func(p Peer) bool { return p.Identity == self })
}

func (rt *Router) peerClient() *http.Client {
	tr := http.DefaultTransport
	if rt.fwd != nil && rt.fwd.proxy.Transport != nil {
		tr = rt.fwd.proxy.Transport // pooled, with the peer dial timeout
	}
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// peerRequest is in's request made to peer p for its local part: signed,
// with the human's credentials and the request id of this replica's response.
func (rt *Router) peerRequest(ctx context.Context, p Peer, in *http.Request, body []byte, reqID string) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, in.Method, strings.TrimRight(p.URL, "/")+in.URL.RequestURI(), rd)
	if err != nil {
		return nil, fmt.Errorf("replica %s's URL %q is unusable: %w", p.Identity, p.URL, err)
	}
	for _, h := range []string{"Authorization", "Accept", "Content-Type"} {
		if v := in.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	if reqID != "" {
		req.Header.Set(api.HeaderRequestID, reqID)
	}
	rt.signer.Sign(req, p.Identity)
	return req, nil
}

// peerDo sends in's request for its local part to peer p.
func (rt *Router) peerDo(ctx context.Context, p Peer, in *http.Request, body []byte, reqID string) (*http.Response, error) {
	req, err := rt.peerRequest(ctx, p, in, body, reqID)
	if err != nil {
		return nil, err
	}
	return rt.peerClient().Do(req)
}

// listQuestions serves GET /v1/spaces/{space}/questions.
func (rt *Router) listQuestions(w http.ResponseWriter, r *http.Request) {
	if IsForwarded(r) {
		rt.next.ServeHTTP(w, r)
		return
	}
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		rt.streamQuestions(w, r)
		return
	}
	local := newRecorder(maxQuestionList)
	rt.next.ServeHTTP(local, r)
	if local.code != http.StatusOK {
		local.copyTo(w)
		return
	}
	if local.over {
		rt.log.Warn("this replica's open questions are too many to merge with the other replicas'; only its own are listed", "space", r.PathValue("space"), "cap", maxQuestionList)
		rt.next.ServeHTTP(w, r)
		return
	}
	var items []json.RawMessage
	if err := json.Unmarshal(local.body.Bytes(), &items); err != nil {
		local.copyTo(w) // not a listing: the API said something else
		return
	}
	reqID := local.h.Get(api.HeaderRequestID)
	peers := rt.otherPeers()
	got := make([][]json.RawMessage, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			list, err := rt.peerList(r, p, reqID)
			if err != nil {
				rt.log.Warn("a replica's questions are left out of a listing", "peer", p.Identity, "space", r.PathValue("space"), "err", err)
				return
			}
			got[i] = list
		}()
	}
	wg.Wait() // each peer's call ends within peerQuestionsTimeout
	for _, list := range got {
		items = append(items, list...)
	}
	writeMerged(w, local, mergeQuestions(items))
}

// writeMerged answers v, merged from every replica's part, as JSON with
// the header of this replica's own answer (its request id), or that answer
// as it was when v does not encode.
func writeMerged(w http.ResponseWriter, local *recorder, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		local.copyTo(w)
		return
	}
	h := w.Header()
	for k, v := range local.h {
		h[k] = v
	}
	h.Del("Content-Length")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(b, '\n'))
}

// peerList is peer p's own listing.
func (rt *Router) peerList(in *http.Request, p Peer, reqID string) ([]json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(in.Context(), peerQuestionsTimeout)
	defer cancel()
	resp, err := rt.peerDo(ctx, p, in, nil, reqID)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxQuestionList+1))
	switch {
	case err != nil:
		return nil, err
	case len(b) > maxQuestionList:
		return nil, fmt.Errorf("its listing is larger than %d bytes", maxQuestionList)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("it answered %d: %s", resp.StatusCode, bytes.TrimSpace(b[:min(len(b), 512)]))
	}
	var list []json.RawMessage
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("its listing is not a JSON list: %w", err)
	}
	return list, nil
}

// mergeQuestions orders the questions of several replicas as one replica
// does (soonest to expire first), each id once.
func mergeQuestions(items []json.RawMessage) []json.RawMessage {
	type keyed struct {
		raw json.RawMessage
		exp time.Time
	}
	seen := map[string]bool{}
	ks := make([]keyed, 0, len(items))
	for _, raw := range items {
		var q struct {
			ID        string    `json:"id"`
			ExpiresAt time.Time `json:"expires_at"`
		}
		_ = json.Unmarshal(raw, &q)
		if q.ID != "" {
			if seen[q.ID] {
				continue
			}
			seen[q.ID] = true
		}
		ks = append(ks, keyed{raw, q.ExpiresAt})
	}
	slices.SortStableFunc(ks, func(a, b keyed) int { return a.exp.Compare(b.exp) })
	out := make([]json.RawMessage, len(ks))
	for i, k := range ks {
		out[i] = k.raw
	}
	return out
}

// answerQuestion serves POST /v1/questions/{id}/answer: here when this
// replica knows the question, else at the first peer that does.
func (rt *Router) answerQuestion(w http.ResponseWriter, r *http.Request) {
	if IsForwarded(r) {
		rt.next.ServeHTTP(w, r)
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(api.BodyAllowance(api.DefaultBodyTimeout, maxAnswerBody)))
	body, err := io.ReadAll(io.LimitReader(r.Body, maxAnswerBody+1))
	_ = rc.SetReadDeadline(time.Time{})
	if err != nil || len(body) > maxAnswerBody {
		// The API says what is wrong with it.
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		rt.next.ServeHTTP(w, r)
		return
	}
	local := newRecorder(maxAnswerBody)
	lr := r.Clone(r.Context())
	lr.Body, lr.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	rt.next.ServeHTTP(local, lr)
	if local.code != http.StatusNotFound {
		local.copyTo(w)
		return
	}
	reqID := local.h.Get(api.HeaderRequestID)
	for _, p := range rt.otherPeers() {
		ans, err := rt.peerAnswer(r, p, body, reqID)
		if err != nil {
			rt.log.Warn("a replica could not be asked about an answer", "peer", p.Identity, "question", r.PathValue("id"), "err", err)
			continue
		}
		if ans.code != http.StatusNotFound {
			ans.copyTo(w)
			return
		}
	}
	local.copyTo(w)
}

// peerAnswer posts the answer to peer p.
func (rt *Router) peerAnswer(in *http.Request, p Peer, body []byte, reqID string) (*recorder, error) {
	ctx, cancel := context.WithTimeout(in.Context(), peerQuestionsTimeout)
	defer cancel()
	resp, err := rt.peerDo(ctx, p, in, body, reqID)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	rec := newRecorder(maxAnswerBody)
	for _, k := range []string{"Content-Type", "X-Content-Type-Options", "Retry-After"} {
		if v := resp.Header.Get(k); v != "" {
			rec.h.Set(k, v)
		}
	}
	rec.h.Set(api.HeaderRequestID, reqID)
	rec.WriteHeader(resp.StatusCode)
	if _, err := io.Copy(rec, io.LimitReader(resp.Body, maxAnswerBody+1)); err != nil || rec.over {
		return nil, fmt.Errorf("its reply could not be read whole (cap %d bytes): %v", maxAnswerBody, err)
	}
	return rec, nil
}

// streamQuestions merges this replica's stream with one stream per live
// peer into the client's stream.
//
// Goroutines: the local stream's handler (writing into a pipe), the local
// reader (cuts the pipe into blocks), the peer lister and one follower per
// peer (each sends the peer's events); the request's goroutine is the one
// writer to the client. The stream ends when the client goes, a write to it
// fails or the local stream ends; then everything is cancelled, the pipe
// closed, and the goroutines are awaited (bounded by streamStopWait).
func (rt *Router) streamQuestions(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	pr, pw := io.Pipe()
	lw := newPipeWriter(pw)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		_ = pr.Close()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(streamStopWait):
			rt.log.Warn("a question stream's goroutines did not end in time", "space", r.PathValue("space"))
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer lw.finish()
		defer func() {
			if v := recover(); v != nil && v != http.ErrAbortHandler {
				rt.log.Error("the question stream handler panicked", "panic", v, "stack", string(debug.Stack()))
			}
		}()
		rt.next.ServeHTTP(lw, r.WithContext(ctx))
	}()

	select {
	case <-lw.ready:
	case <-ctx.Done():
		return
	}
	h := w.Header()
	for k, v := range lw.sent {
		h[k] = v
	}
	if lw.code != http.StatusOK || !strings.HasPrefix(lw.sent.Get("Content-Type"), "text/event-stream") {
		w.WriteHeader(lw.code) // an error, or not a stream: as it is
		_, _ = io.Copy(w, pr)
		return
	}
	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}

	out := make(chan []byte, sseQueue)
	localEnded := make(chan struct{})
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer close(localEnded)
		rt.readBlocks(ctx, pr, "this replica", false, out)
	}()
	go func() {
		defer wg.Done()
		rt.followPeers(ctx, r, lw.sent.Get(api.HeaderRequestID), out)
	}()
	for {
		var b []byte
		select {
		case <-ctx.Done():
			return
		case <-localEnded:
			return
		case b = <-out:
		}
		_ = rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout))
		if _, err := w.Write(b); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

// followPeers keeps one follower per live peer until ctx ends: peers are
// listed every peerRelist, new ones followed, gone ones dropped.
func (rt *Router) followPeers(ctx context.Context, r *http.Request, reqID string, out chan<- []byte) {
	running := map[Peer]context.CancelFunc{}
	var wg sync.WaitGroup
	defer func() {
		for _, stop := range running {
			stop()
		}
		wg.Wait() // each follower ends with its context
	}()
	t := time.NewTicker(peerRelist)
	defer t.Stop()
	for {
		live := map[Peer]bool{}
		for _, p := range rt.otherPeers() {
			live[p] = true
			if running[p] != nil {
				continue
			}
			pctx, stop := context.WithCancel(ctx)
			running[p] = stop
			wg.Add(1)
			go func() {
				defer wg.Done()
				rt.followPeer(pctx, r, p, reqID, out)
			}()
		}
		for p, stop := range running {
			if !live[p] {
				stop()
				delete(running, p)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// followPeer relays peer p's events, reopening its stream when it ends,
// until ctx ends (the peer is no longer listed, or the client left).
func (rt *Router) followPeer(ctx context.Context, r *http.Request, p Peer, reqID string, out chan<- []byte) {
	failures := 0
	for {
		err := rt.peerStream(ctx, r, p, reqID, out)
		if ctx.Err() != nil {
			return
		}
		failures++
		level := slog.LevelWarn
		if failures > 1 {
			level = slog.LevelDebug // said once while the peer stays away
		}
		rt.log.Log(ctx, level, "a replica's question stream ended; it is reopened while the replica is listed", "peer", p.Identity, "space", r.PathValue("space"), "err", err)
		t := time.NewTimer(peerRelist)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// peerStream opens peer p's stream and relays its events until it ends.
func (rt *Router) peerStream(ctx context.Context, r *http.Request, p Peer, reqID string, out chan<- []byte) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slow := time.AfterFunc(peerQuestionsTimeout, cancel)
	resp, err := rt.peerDo(ctx, p, r, nil, reqID)
	if !slow.Stop() {
		err = fmt.Errorf("no answer within %s", peerQuestionsTimeout)
	}
	if err != nil {
		if resp != nil {
			resp.Body.Close()
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("it answered %d (%s): %s", resp.StatusCode, resp.Header.Get("Content-Type"), bytes.TrimSpace(b))
	}
	return rt.readBlocks(ctx, resp.Body, p.Identity, true, out)
}

// readBlocks cuts a stream into SSE blocks and sends them to out until the
// stream or ctx ends. From a peer only events are sent: its preamble and
// heartbeats are for the connection between the replicas.
func (rt *Router) readBlocks(ctx context.Context, rd io.Reader, from string, eventsOnly bool, out chan<- []byte) error {
	br := bufio.NewReaderSize(rd, 64<<10)
	for {
		b, err := readBlock(br, maxSSEBlock)
		if errors.Is(err, errBlockTooBig) {
			rt.log.Warn("an event larger than the cap is dropped from a question stream", "from", from, "cap", maxSSEBlock)
			continue
		}
		if err != nil {
			return err
		}
		if eventsOnly && !isEvent(b) {
			continue
		}
		select {
		case out <- b:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

var errBlockTooBig = errors.New("the block is larger than the cap")

// readBlock reads one SSE block: its lines up to and with the blank line
// that ends it. A block longer than limit is read to its end and dropped
// (errBlockTooBig); a block the stream ends in the middle of is dropped
// with the stream's error.
func readBlock(br *bufio.Reader, limit int) ([]byte, error) {
	var b []byte
	tooBig, midLine := false, false
	for {
		line, err := br.ReadSlice('\n')
		if !tooBig {
			if len(b)+len(line) > limit {
				tooBig, b = true, nil
			} else {
				b = append(b, line...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			midLine = true
			continue
		}
		if err != nil {
			return nil, err
		}
		blank := !midLine && (len(line) == 1 || (len(line) == 2 && line[0] == '\r'))
		midLine = false
		if !blank {
			continue
		}
		switch {
		case tooBig:
			return nil, errBlockTooBig
		case len(b) == len(line):
			b = b[:0] // a stray blank line: no block yet
			continue
		}
		return b, nil
	}
}

// isEvent reports whether an SSE block names an event.
func isEvent(b []byte) bool {
	for line := range bytes.Lines(b) {
		if bytes.HasPrefix(line, []byte("event:")) {
			return true
		}
	}
	return false
}

// recorder keeps a response in memory up to a cap (over says it was cut).
type recorder struct {
	h     http.Header
	code  int
	body  bytes.Buffer
	limit int
	over  bool
}

func newRecorder(limit int) *recorder { return &recorder{h: http.Header{}, limit: limit} }

func (rc *recorder) Header() http.Header { return rc.h }

func (rc *recorder) WriteHeader(code int) {
	if rc.code == 0 {
		rc.code = code
	}
}

func (rc *recorder) Write(b []byte) (int, error) {
	rc.WriteHeader(http.StatusOK)
	if rc.body.Len()+len(b) > rc.limit {
		rc.over = true
		return 0, fmt.Errorf("the answer is larger than %d bytes", rc.limit)
	}
	return rc.body.Write(b)
}

// copyTo writes the recorded response to w.
func (rc *recorder) copyTo(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range rc.h {
		h[k] = v
	}
	code := rc.code
	if code == 0 {
		code = http.StatusOK
	}
	w.WriteHeader(code)
	_, _ = w.Write(rc.body.Bytes())
}

// pipeWriter is the ResponseWriter of the local stream: its body goes into
// a pipe, its status and header are handed over once, at the first
// WriteHeader or Write (ready closes then).
type pipeWriter struct {
	h     http.Header
	pw    *io.PipeWriter
	once  sync.Once
	ready chan struct{}
	code  int         // set before ready closes
	sent  http.Header // the header as of WriteHeader; set before ready closes
}

func newPipeWriter(pw *io.PipeWriter) *pipeWriter {
	return &pipeWriter{h: http.Header{}, pw: pw, ready: make(chan struct{})}
}

func (p *pipeWriter) Header() http.Header { return p.h }

func (p *pipeWriter) WriteHeader(code int) {
	if code < 200 {
		return // informational: not the response
	}
	p.once.Do(func() {
		p.code, p.sent = code, p.h.Clone()
		close(p.ready)
	})
}

func (p *pipeWriter) Write(b []byte) (int, error) {
	p.WriteHeader(http.StatusOK)
	return p.pw.Write(b)
}

// FlushError lets the handler flush (http.ResponseController): the pipe
// holds nothing back.
func (p *pipeWriter) FlushError() error { return nil }

func (p *pipeWriter) Flush() {}

// finish ends the body after the handler returned.
func (p *pipeWriter) finish() {
	p.WriteHeader(http.StatusOK)
	_ = p.pw.Close()
}
