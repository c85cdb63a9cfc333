package e2b

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/sandboxd/sandboxd/egress/gateway"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// The lifecycle endpoints: timeout, pause, resume and connect, snapshots
// and forks, the network and the metrics.

// extend sets info's timeout to now+d (none for 0; never shorter than it
// is, when keepLonger), as the sandbox's expiry.
func (h *Handler) extend(ctx context.Context, info sandbox.Info, d time.Duration, keepLonger bool) error {
	rec := h.recordOf(info)
	end := time.Now().Add(d).UTC()
	switch {
	case d == 0:
		if rec.EndAt.IsZero() {
			if _, set, _ := sandbox.ExpiryOf(info); set {
				return nil
			}
		}
		return h.cfg.Sandboxes.SetExpiry(ctx, info.Tenant, info.ID, sandbox.Expiry{})
	case keepLonger && !rec.EndAt.IsZero() && !rec.EndAt.Before(end):
		return nil
	}
	return h.cfg.Sandboxes.SetExpiry(ctx, info.Tenant, info.ID, sandbox.Expiry{At: end, Then: rec.fixed().then()})
}

func (h *Handler) setTimeout(w http.ResponseWriter, r *http.Request, tenant string) error {
	var req timeoutBody
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Timeout == nil {
		return errdefs.InvalidArgument("the body has no timeout; give it in seconds")
	}
	d, err := timeoutOf(req.Timeout)
	if err != nil {
		return err
	}
	info, err := h.own(r, tenant)
	if err != nil {
		return err
	}
	if err := h.extend(r.Context(), info, d, false); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *Handler) pause(w http.ResponseWriter, r *http.Request, tenant string) error {
	var req timeoutBody
	info, err := h.ownWith(r, tenant, &req)
	if err != nil {
		return err
	}
	if state(info.State) == "paused" {
		return errdefs.Conflict("sandbox %s is already paused; connect to it to resume it", info.ID)
	}
	if req.Memory != nil && !*req.Memory {
		_, err = h.cfg.Sandboxes.Hibernate(r.Context(), tenant, info.ID)
	} else {
		_, err = h.cfg.Sandboxes.Pause(r.Context(), tenant, info.ID)
	}
	if err != nil {
		return err
	}
	// A paused sandbox has no timeout until it is resumed.
	if err := h.cfg.Sandboxes.SetExpiry(r.Context(), tenant, info.ID, sandbox.Expiry{}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// wake resumes the sandbox of r when it is paused and sets its timeout;
// it answers whether it was paused.
func (h *Handler) wake(r *http.Request, tenant string, req timeoutBody, mustBePaused bool) (sandbox.Info, bool, error) {
	d, err := timeoutOf(req.Timeout)
	if err != nil {
		return sandbox.Info{}, false, err
	}
	info, err := h.own(r, tenant)
	if err != nil {
		return sandbox.Info{}, false, err
	}
	paused := state(info.State) != "running"
	if mustBePaused && !paused {
		return sandbox.Info{}, false, errdefs.Conflict("sandbox %s is already running; connect to it instead", info.ID)
	}
	if paused {
		if info, err = h.cfg.Sandboxes.Resume(r.Context(), tenant, info.ID); err != nil {
			return sandbox.Info{}, false, err
		}
	}
	if err := h.extend(r.Context(), info, d, !paused); err != nil {
		return sandbox.Info{}, false, err
	}
	return info, paused, nil
}

func (h *Handler) connect(w http.ResponseWriter, r *http.Request, tenant string) error {
	var req timeoutBody
	if err := decode(r, &req); err != nil {
		return err
	}
	info, resumed, err := h.wake(r, tenant, req, false)
	if err != nil {
		return err
	}
	rec := h.recordOf(info)
	status := http.StatusOK
	if resumed {
		status = http.StatusCreated
	}
	writeJSON(w, status, h.out(tenant, info, rec))
	return nil
}

func (h *Handler) resume(w http.ResponseWriter, r *http.Request, tenant string) error {
	var req timeoutBody
	if err := decode(r, &req); err != nil {
		return err
	}
	info, _, err := h.wake(r, tenant, req, true)
	if err != nil {
		return err
	}
	rec := h.recordOf(info)
	writeJSON(w, http.StatusCreated, h.out(tenant, info, rec))
	return nil
}

func (h *Handler) snapshot(w http.ResponseWriter, r *http.Request, tenant string) error {
	var req timeoutBody
	info, err := h.ownWith(r, tenant, &req)
	if err != nil {
		return err
	}
	snap, err := h.cfg.Sandboxes.Snapshot(r.Context(), tenant, info.ID, req.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, snapshotOf(snap))
	return nil
}

func snapshotOf(s sandbox.Snapshot) snapshotOut {
	out := snapshotOut{SnapshotID: s.ID, Names: []string{}}
	if s.Name != "" {
		out.Names = append(out.Names, s.Name)
	}
	return out
}

func (h *Handler) listSnapshots(w http.ResponseWriter, r *http.Request, tenant string) error {
	q := r.URL.Query()
	limit, err := intParam(q, 100, 1, 100, "limit", "paginationLimit")
	if err != nil {
		return err
	}
	offset, err := intParam(q, 0, 0, 1<<30, "nextToken", "paginationNextToken")
	if err != nil {
		return err
	}
	snaps, err := h.cfg.Sandboxes.Snapshots(r.Context(), tenant)
	if err != nil {
		return err
	}
	out := []snapshotOut{}
	for _, s := range snaps {
		if (q.Get("sandboxID") == "" || s.Sandbox == q.Get("sandboxID")) && (q.Get("name") == "" || s.Name == q.Get("name")) {
			out = append(out, snapshotOf(s))
		}
	}
	offset = min(offset, len(out))
	page := out[offset:min(offset+limit, len(out))]
	if offset+limit < len(out) {
		w.Header().Set("X-Next-Token", strconv.Itoa(offset+limit))
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (h *Handler) deleteTemplate(w http.ResponseWriter, r *http.Request, tenant string) error {
	id := r.PathValue("id")
	if _, err := h.cfg.Sandboxes.GetSnapshot(r.Context(), tenant, id); err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return errdefs.NotFound("snapshot %q not found; sandboxd deletes snapshots here, and templates are configured by the operator", id)
		}
		return err
	}
	if err := h.cfg.Sandboxes.DeleteSnapshot(r.Context(), tenant, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *Handler) fork(w http.ResponseWriter, r *http.Request, tenant string) error {
	var req timeoutBody
	if err := decode(r, &req); err != nil {
		return err
	}
	d, err := timeoutOf(req.Timeout)
	if err != nil {
		return err
	}
	n := 1
	if req.Count != nil {
		n = *req.Count
	}
	if n < 1 || n > maxFork {
		return errdefs.InvalidArgument("count %d is out of range; fork 1 to %d copies", n, maxFork)
	}
	info, err := h.own(r, tenant)
	if err != nil {
		return err
	}
	convs := make([]string, n)
	for i := range convs {
		convs[i] = newConversation()
	}
	release, err := h.hold(r.Context(), tenant, convs...)
	if err != nil {
		return err
	}
	defer release()
	snap, made, failed, err := h.cfg.Sandboxes.Fork(r.Context(), tenant, info.ID, convs)
	if err != nil && len(made) == 0 {
		return err
	}
	// E2B's fork leaves no snapshot behind; the copies keep their files.
	if err := h.cfg.Sandboxes.DeleteSnapshot(r.Context(), tenant, snap.ID); err != nil {
		h.log.Warn("e2b: the fork's snapshot cannot be removed", "snapshot", snap.ID, "err", err)
	}
	// The copies keep the source's label (sandbox.Fork); their timeout
	// starts now.
	src := h.recordOf(info)
	out := []forkResult{}
	for _, m := range made {
		if d > 0 {
			if err := h.cfg.Sandboxes.SetExpiry(r.Context(), tenant, m.ID, sandbox.Expiry{At: time.Now().Add(d), Then: src.fixed().then()}); err != nil {
				h.log.Warn("e2b: a fork's timeout cannot be set; it runs until killed", "sandbox", m.ID, "err", err)
			}
		}
		so := h.out(tenant, m, src)
		out = append(out, forkResult{Sandbox: &so})
	}
	for _, f := range failed {
		out = append(out, forkResult{Error: &errorBody{Code: statusOf(f.Err), Message: f.Err.Error()}})
	}
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (h *Handler) network(w http.ResponseWriter, r *http.Request, tenant string) error {
	var req networkConfig
	if err := decode(r, &req); err != nil {
		return err
	}
	if len(req.EgressProxy) > 0 && string(req.EgressProxy) != "null" {
		return errdefs.InvalidArgument("network.egressProxy is not served by sandboxd; its egress goes through its own proxy (network allowOut and denyOut)")
	}
	hs, err := rulesOf(req.Rules)
	if err != nil {
		return err
	}
	info, err := h.own(r, tenant)
	if err != nil {
		return err
	}
	// As E2B's update, what is left out is cleared: no rules, no headers.
	p := gateway.Policy{Allow: req.AllowOut, Deny: req.DenyOut, Headers: &hs}
	if req.AllowInternet != nil && !*req.AllowInternet {
		p = gateway.Policy{Allow: []string{}, Deny: []string{"*", "0.0.0.0/0", "::/0"}}
	}
	if p.Allow == nil {
		p.Allow = []string{}
	}
	if _, err := h.cfg.Host.SetNetwork(r.Context(), tenant, info.ID, p); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *Handler) metrics(w http.ResponseWriter, r *http.Request, tenant string) error {
	info, err := h.own(r, tenant)
	if err != nil {
		return err
	}
	within, err := metricsRange(r.URL.Query())
	if err != nil {
		return err
	}
	out := []metricOut{}
	st, err := h.cfg.Sandboxes.Stats(r.Context(), tenant, info.ID)
	if at := bucketOf(st.ReadAt); err == nil && !st.ReadAt.IsZero() && within(at) {
		out = append(out, metricOut{Timestamp: at.UTC(), TimestampUnix: at.Unix(), CPUUsedPct: st.CPUPercent,
			MemUsed: st.MemoryBytes, MemTotal: st.MemoryLimitBytes})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
