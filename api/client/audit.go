package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sandboxd/sandboxd/api"
)

// AuditQuery narrows GET /v1/audit; a zero field does not narrow.
type AuditQuery struct {
	Since, Until time.Time // the actions' start; Until is exclusive
	Run, Sandbox string
	Limit        int    // records per page, 1 to 1000 (default 100)
	Cursor       string // the Next of the page before
}

// Audit reads one page of the tenant's audit records, oldest first. Pass
// the page's Next as the next query's Cursor; the last page has none.
func (c *Client) Audit(ctx context.Context, q AuditQuery) (api.AuditPage, error) {
	v := url.Values{}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.UTC().Format(time.RFC3339Nano))
	}
	if q.Run != "" {
		v.Set("run", q.Run)
	}
	if q.Sandbox != "" {
		v.Set("sandbox", q.Sandbox)
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	path := "/v1/audit"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var out api.AuditPage
	err := c.do(ctx, http.MethodGet, path, nil, http.StatusOK, &out)
	return out, err
}
