package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"

	"github.com/sandboxd/sandboxd/api"
)

// Forwarder proxies requests to the replica that owns their conversation:
// bodies and responses stream through (SSE included), and a peer that
// cannot be reached is a 503 with Retry-After, never a hang.
type Forwarder struct {
	signer  *Signer
	proxy   *httputil.ReverseProxy
	metrics *Metrics
	log     *slog.Logger
}

type peerKey struct{}

// errOwnerGone cancels a forward whose peer lost the conversation's lease
// while the request waited on it (it stopped responding: paused, frozen,
// partitioned): the client is told to retry, and the retry takes over.
var errOwnerGone = errors.New("the owner's lease expired while the request waited for it")

// ownerCheck is how often a forward in flight checks that its peer still
// holds the conversation.
const ownerCheck = 500 * time.Millisecond

// peerDialTimeout bounds connecting to a peer; a replica that died is
// usually a refused connection, a partitioned one this timeout.
const peerDialTimeout = 2 * time.Second

// NewForwarder returns a Forwarder that signs with signer.
func NewForwarder(signer *Signer, m *Metrics, log *slog.Logger) *Forwarder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &Forwarder{signer: signer, metrics: m, log: log}
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: peerDialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 0, // a tool call may run for minutes
		ForceAttemptHTTP2:     false,
	}
	f.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			p := pr.In.Context().Value(peerKey{}).(Peer)
			u, _ := url.Parse(p.URL)
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host
			f.signer.Sign(pr.Out, p.Identity)
		},
		Transport: tr,
		// 0: net/http/httputil flushes at once by itself for SSE and for
		// bodies of unknown length (streamed output), and not per write for
		// the rest.
		FlushInterval: 0,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p, _ := r.Context().Value(peerKey{}).(Peer)
			if errors.Is(context.Cause(r.Context()), errOwnerGone) {
				f.metrics.forward("peer_unavailable")
				f.log.Warn("a forwarded request was given up: the owning replica stopped answering and its lease expired", "peer", p.Identity)
				WriteUnavailable(w, time.Second, "the replica that owned this conversation ("+p.Identity+") stopped answering and its lease expired; retry, another replica takes the conversation over")
				return
			}
			if errors.Is(err, context.Canceled) {
				return // the client left
			}
			f.metrics.forward("peer_unavailable")
			f.log.Warn("forwarding to the owning replica failed", "peer", p.Identity, "url", p.URL, "err", err)
			WriteUnavailable(w, peerDialTimeout, "the replica that owns this conversation ("+p.Identity+") cannot be reached; retry in a few seconds, another replica takes over when its lease expires")
		},
		ModifyResponse: func(*http.Response) error {
			f.metrics.forward("ok")
			return nil
		},
	}
	return f
}

// Forward serves r by proxying it to p. stillOwner is asked every half
// second while the request is under way; when it says no, the forward is
// given up (a call may run for minutes on a live owner, so there is no
// fixed timeout — only the lease tells a dead owner from a slow call).
func (f *Forwarder) Forward(w http.ResponseWriter, r *http.Request, p Peer, stillOwner func() bool) {
	ctx, cancel := context.WithCancelCause(context.WithValue(r.Context(), peerKey{}, p))
	defer cancel(nil)
	if stillOwner != nil {
		go func() {
			t := time.NewTicker(ownerCheck)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if !stillOwner() {
						cancel(errOwnerGone)
						return
					}
				}
			}
		}()
	}
	f.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// WriteUnavailable responds 503 with Retry-After and a one-sentence error
// message, in the API's error shape.
func WriteUnavailable(w http.ResponseWriter, after time.Duration, msg string) {
	secs := int((after + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	writeError(w, http.StatusServiceUnavailable, "unavailable", msg)
}

func writeError(w http.ResponseWriter, code int, kind, msg string) {
	b, _ := json.Marshal(api.ErrorBody{Error: api.ErrorDetail{Code: kind, Message: msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}
