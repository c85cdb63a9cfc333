package client

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/errdefs"
)

// Runs lists the tenant's live runs.
func (c *Client) Runs(ctx context.Context) ([]api.RunSummary, error) {
	var out []api.RunSummary
	err := c.do(ctx, http.MethodGet, "/v1/runs", nil, http.StatusOK, &out)
	return out, err
}

// Questions lists the open questions of a space.
func (c *Client) Questions(ctx context.Context, space string) ([]api.Question, error) {
	var out []api.Question
	err := c.do(ctx, http.MethodGet, "/v1/spaces/"+url.PathEscape(space)+"/questions", nil, http.StatusOK, &out)
	return out, err
}

// AnswerQuestion answers (or, with Skip, skips) a question.
func (c *Client) AnswerQuestion(ctx context.Context, id string, a api.Answer) (api.AnswerResult, error) {
	var out api.AnswerResult
	err := c.do(ctx, http.MethodPost, "/v1/questions/"+url.PathEscape(id)+"/answer", a, http.StatusOK, &out)
	return out, err
}

// QuestionEvent is one event of a space's stream.
type QuestionEvent struct {
	Type     string          // "question" or "resolved"
	Question *api.Question   // for "question"
	Resolved *api.Resolution // for "resolved"
}

// maxEventLine caps one SSE line (a question card with its context).
const maxEventLine = 1 << 20

// WatchQuestions opens the space's SSE stream; while it is open a human is
// connected to the space. It returns once sandboxd has accepted the stream.
// Events arrive on the channel, which is closed when the stream ends (ctx
// ended, the server closed it, or a malformed event); the goroutine that
// reads the stream is owned by that lifetime.
func (c *Client) WatchQuestions(ctx context.Context, space string) (<-chan QuestionEvent, error) {
	path := "/v1/spaces/" + url.PathEscape(space) + "/questions"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base.String()+path, nil)
	if err != nil {
		return nil, errdefs.InvalidArgument("request GET %s cannot be made: %v", path, err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	hc := *c.http
	hc.Timeout = 0 // a stream lives as long as ctx
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, errdefs.Unavailable("sandboxd at %s does not answer: %v; check that it runs and the address is right", c.base, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return nil, decodeError(resp.StatusCode, data)
	}
	ch := make(chan QuestionEvent, 16)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), maxEventLine)
		var name, data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if name != "" && data != "" {
					ev := QuestionEvent{Type: name}
					var err error
					if name == "question" {
						ev.Question = new(api.Question)
						err = json.Unmarshal([]byte(data), ev.Question)
					} else {
						ev.Resolved = new(api.Resolution)
						err = json.Unmarshal([]byte(data), ev.Resolved)
					}
					if err != nil {
						return
					}
					select {
					case ch <- ev:
					case <-ctx.Done():
						return
					}
				}
				name, data = "", ""
			case strings.HasPrefix(line, "event:"):
				name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
			case strings.HasPrefix(line, "data:"):
				data += strings.TrimSpace(strings.TrimPrefix(line, "data:"))
			}
		}
	}()
	return ch, nil
}
