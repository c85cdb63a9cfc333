package cluster

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/audit"
)

// Each replica keeps its own audit chain in its own data dir, so on
// GET /v1/audit the Router asks every live replica for its part (this one
// locally, the others as forwarded requests served locally there) and
// merges them: the records by time, each replica's in its chain's order.
// The cursor it answers is one position per replica, so the next page goes
// on from where each replica's part ended; a replica that does not answer
// in time is named in the page's unreached and asked again from the same
// position on the next page.

// maxAuditPart caps one replica's page (1000 records of well under 1 KiB).
const maxAuditPart = 8 << 20

// auditPart is one replica's answer to a page.
type auditPart struct {
	identity string
	recs     []audit.Record
	more     bool // the replica has records past these
	err      error
}

// listAudit serves GET /v1/audit.
func (rt *Router) listAudit(w http.ResponseWriter, r *http.Request) {
	if IsForwarded(r) || rt.owners == nil {
		rt.next.ServeHTTP(w, r)
		return
	}
	q := r.URL.Query()
	pos, ok := parseMergedCursor(q.Get("cursor"))
	if !ok {
		rt.next.ServeHTTP(w, r) // the API refuses the cursor in its words
		return
	}
	limit := audit.DefaultLimit
	if l := q.Get("limit"); l != "" {
		if n, err := strconv.Atoi(l); err == nil && n >= 1 && n <= audit.MaxLimit {
			limit = n
		} // else the local answer below says what is wrong
	}
	self := rt.owners.o.Self.Identity

	// This replica first: its answer is the request's (a bad parameter,
	// no audit record, a refused token), the others only add records.
	local := newRecorder(maxAuditPart)
	rt.next.ServeHTTP(local, partRequest(r, pos[self]))
	if local.code != http.StatusOK || local.over {
		local.copyTo(w)
		return
	}
	mine, err := readAuditPart(local.body.Bytes())
	if err != nil {
		local.copyTo(w)
		return
	}
	mine.identity = self
	parts := []auditPart{mine}

	peers := rt.otherPeers()
	got := make([]auditPart, len(peers))
	reqID := local.h.Get(api.HeaderRequestID)
	var wg sync.WaitGroup
	for i, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = rt.peerAudit(r, p, pos[p.Identity], reqID)
		}()
	}
	wg.Wait() // each peer's call ends within peerQuestionsTimeout
	var unreached []string
	for _, part := range got {
		if part.err != nil {
			rt.log.Warn("a replica's audit records are left out of a page", "peer", part.identity, "err", part.err)
			unreached = append(unreached, part.identity)
			continue
		}
		parts = append(parts, part)
	}

	page := mergeAudit(parts, limit, pos)
	page.Unreached = unreached
	if len(unreached) > 0 && page.Next == "" {
		// The unreached replicas may hold more: the cursor keeps their
		// positions for the next page.
		page.Next = makeMergedCursor(pos)
	}
	writeMerged(w, local, page)
}

// mergeAudit takes up to limit records from parts, each part's in its
// order, the earliest head first, and moves pos past what it took. Next is
// set when any part has records left.
func mergeAudit(parts []auditPart, limit int, pos map[string]uint64) api.AuditPage {
	out := api.AuditPage{Records: []audit.Record{}}
	heads := make([]int, len(parts))
	for len(out.Records) < limit {
		best := -1
		for i, p := range parts {
			if heads[i] >= len(p.recs) {
				continue
			}
			if best < 0 || p.recs[heads[i]].Time.Before(parts[best].recs[heads[best]].Time) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		rec := parts[best].recs[heads[best]]
		heads[best]++
		out.Records = append(out.Records, rec)
		pos[parts[best].identity] = rec.Seq
	}
	for i, p := range parts {
		if heads[i] < len(p.recs) || p.more {
			out.Next = makeMergedCursor(pos)
			break
		}
	}
	return out
}

// partRequest is r asking one replica's part from after its seq (0: from
// the start).
func partRequest(r *http.Request, after uint64) *http.Request {
	pr := r.Clone(r.Context())
	q := pr.URL.Query()
	q.Del("cursor")
	if after > 0 {
		q.Set("cursor", api.AuditCursor(after))
	}
	u := *pr.URL
	u.RawQuery = q.Encode()
	pr.URL = &u
	pr.RequestURI = u.RequestURI()
	return pr
}

// peerAudit is peer p's part, from after its seq.
func (rt *Router) peerAudit(in *http.Request, p Peer, after uint64, reqID string) auditPart {
	part := auditPart{identity: p.Identity}
	ctx, cancel := context.WithTimeout(in.Context(), peerQuestionsTimeout)
	defer cancel()
	resp, err := rt.peerDo(ctx, p, partRequest(in, after), nil, reqID)
	if err != nil {
		part.err = err
		return part
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAuditPart+1))
	switch {
	case err != nil:
		part.err = err
	case len(b) > maxAuditPart:
		part.err = fmt.Errorf("its page is larger than %d bytes", maxAuditPart)
	case resp.StatusCode != http.StatusOK:
		part.err = fmt.Errorf("it answered %d: %s", resp.StatusCode, b[:min(len(b), 512)])
	default:
		got, err := readAuditPart(b)
		got.identity, got.err = p.Identity, err
		return got
	}
	return part
}

func readAuditPart(b []byte) (auditPart, error) {
	var page api.AuditPage
	if err := json.Unmarshal(b, &page); err != nil {
		return auditPart{}, fmt.Errorf("its page is not an audit page: %w", err)
	}
	return auditPart{recs: page.Records, more: page.Next != ""}, nil
}

// A merged cursor is "m" and a JSON object of replica identity to the seq
// of the last record a page held from it, opaque to callers.
func makeMergedCursor(pos map[string]uint64) string {
	b, _ := json.Marshal(pos)
	return base64.RawURLEncoding.EncodeToString(append([]byte("m"), b...))
}

func parseMergedCursor(c string) (map[string]uint64, bool) {
	pos := map[string]uint64{}
	if c == "" {
		return pos, true
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil && len(b) > 1 && b[0] == 'm' && json.Unmarshal(b[1:], &pos) == nil {
		return pos, true
	}
	return nil, false
}
