package interp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools/eval"
)

type executeRequest struct {
	Code      *string           `json:"code"`
	ContextID string            `json:"context_id"`
	Language  string            `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

// execute runs one cell and streams its output as E2B's JSON lines:
// stdout, stderr, result (a MIME bundle), error, number_of_executions and
// end_of_execution last. A failing cell is an error line in a 200 answer;
// only a cell that cannot run at all is an HTTP error. The caller closing
// the stream (the SDK's timeoutMs) interrupts the cell.
func (s *Server) execute(w http.ResponseWriter, r *http.Request, sb *box) {
	var req executeRequest
	if err := s.decode(r, &req, "execute"); err != nil {
		s.fail(w, err)
		return
	}
	if req.Code == nil {
		s.fail(w, errdefs.InvalidArgument("the execute body has no code; send {\"code\": \"...\"}"))
		return
	}
	if req.ContextID != "" && req.Language != "" {
		s.fail(w, errdefs.InvalidArgument("Only one of context_id or language can be provided"))
		return
	}
	var c ctxRecord
	if req.ContextID != "" {
		var err error
		if c, err = s.find(r.Context(), sb, req.ContextID); err != nil {
			s.fail(w, err)
			return
		}
	} else {
		lang, err := language(req.Language)
		if err != nil {
			s.fail(w, err)
			return
		}
		c = defaultContext(sb, lang)
	}
	for k := range req.EnvVars {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			s.fail(w, errdefs.InvalidArgument("env_vars has the name %q, which cannot be an environment variable: names are not empty and hold no '=' or NUL", k))
			return
		}
	}

	// A write that fails means the caller is gone even where the server
	// has not noticed yet: it ends the cell as the caller's going does.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	out := newLineWriter(w, s.cfg.writeTimeout, cancel)
	stop := out.keepalive(s.cfg.keepalive)
	defer stop()
	emit := func(o eval.CellOutput) {
		switch {
		case o.Stream == "stdout" || o.Stream == "stderr":
			out.line(map[string]any{"type": o.Stream, "text": o.Text, "timestamp": time.Now().UTC().Format(time.RFC3339Nano)})
		case o.Data != nil:
			out.line(result(o.Data, o.Main))
		}
	}
	end, err := s.kernels.RunCell(ctx, sb.target(c), c.lang, *req.Code, req.EnvVars, s.cfg.budget, emit)
	if err != nil && ctx.Err() != nil {
		return // the caller went away: the cell was interrupted, and no one reads on
	}
	if err != nil && !out.started() {
		stop()
		s.fail(w, err)
		return
	}
	if err != nil {
		end.Name, end.Value = "ExecutionError", err.Error()
	}
	if end.Count > 0 {
		out.line(map[string]any{"type": "number_of_executions", "execution_count": end.Count})
	}
	if end.Name != "" {
		out.line(map[string]any{"type": "error", "name": end.Name, "value": end.Value, "traceback": end.Traceback})
	}
	out.line(map[string]any{"type": "end_of_execution"})
}

// MIME types of a result, by E2B's field name. The JSON-valued ones come
// from the kernel as JSON text.
var (
	textFields = map[string]string{
		"text/plain": "text", "text/html": "html", "text/markdown": "markdown", "image/svg+xml": "svg",
		"image/png": "png", "image/jpeg": "jpeg", "application/pdf": "pdf", "text/latex": "latex",
		"application/javascript": "javascript",
	}
	jsonFields = map[string]string{
		"application/json":                    "json",
		"application/vnd.sandboxd.data+json":  "data",
		"application/vnd.sandboxd.chart+json": "chart",
	}
)

// result is a result line of a display's MIME bundle.
func result(data map[string]string, main bool) map[string]any {
	r := map[string]any{"type": "result", "is_main_result": main}
	extra := map[string]any{}
	for mime, v := range data {
		if f, ok := textFields[mime]; ok {
			if f == "text" {
				v = unquote(v)
			}
			r[f] = v
			continue
		}
		if f, ok := jsonFields[mime]; ok {
			if json.Valid([]byte(v)) {
				r[f] = json.RawMessage(v)
			}
			continue
		}
		extra[mime] = v
	}
	if len(extra) > 0 {
		r["extra"] = extra
	}
	return r
}

// unquote drops the quotes of a string's repr, as E2B's results show a
// string value ('hi' is hi).
func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '\'' && s[len(s)-1] == '\'' || s[0] == '"' && s[len(s)-1] == '"') {
		return s[1 : len(s)-1]
	}
	return s
}

// lineWriter writes JSON lines to the response, each flushed, each with a
// write deadline so a caller that stops reading cannot hold the cell.
type lineWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	gone    func() // called once a write fails

	mu     sync.Mutex // guards the response and the fields below
	begun  bool
	broken bool
}

func newLineWriter(w http.ResponseWriter, timeout time.Duration, gone func()) *lineWriter {
	return &lineWriter{w: w, rc: http.NewResponseController(w), timeout: timeout, gone: gone}
}

func (l *lineWriter) started() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.begun
}

func (l *lineWriter) line(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]any{"type": "error", "name": "EncodingError", "value": "an output could not be encoded as JSON: " + err.Error()})
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.broken {
		return
	}
	if !l.begun {
		l.begun = true
		l.w.Header().Set("Content-Type", "application/x-ndjson")
		l.w.WriteHeader(http.StatusOK)
	}
	err = l.rc.SetWriteDeadline(time.Now().Add(l.timeout))
	if err == nil || errors.Is(err, http.ErrNotSupported) {
		_, err = l.w.Write(b)
	}
	if err == nil {
		if err = l.rc.Flush(); errors.Is(err, http.ErrNotSupported) {
			err = nil
		}
	}
	if err != nil {
		l.broken = true
		l.gone()
	}
}

// keepalive writes a keepalive line every d (as E2B's server does), so a
// proxy keeps the stream open and a caller gone without a word is noticed:
// Node's fetch drops an aborted stream's socket only when more of it
// arrives. stop ends it and waits for it.
func (l *lineWriter) keepalive(d time.Duration) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				l.line(map[string]string{"type": "keepalive"})
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			<-exited
		})
	}
}
