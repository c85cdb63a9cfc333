package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
)

// An expiry is a step taken at a set time, whatever the sandbox's use:
// delete it, or pause or hibernate it (E2B's timeout). It is kept in the
// engine, on the sandbox (LabelExpiry), so every replica reads the same
// and a restarted or new owner takes it; the step is taken by the
// manager's reaper under the reap gate, so only the conversation's owner
// takes it. Unlike a label, it can change after creation on every backend
// that can keep it (Annotator, or ExpiryRecorder where labels are fixed).

// LabelExpiry holds a sandbox's expiry as JSON ({"at", "then"}); "{}" is
// an expiry cleared after creation.
const LabelExpiry = "io.sandboxd.expiry"

// The steps of an expiry.
const (
	ExpireDelete    = "delete"
	ExpirePause     = "pause"
	ExpireHibernate = "hibernate"
)

// Expiry is a step (Then) taken at At; the zero Expiry is none.
type Expiry struct {
	At   time.Time `json:"at,omitzero"`
	Then string    `json:"then,omitempty"`
}

// IsZero reports whether e is no expiry.
func (e Expiry) IsZero() bool { return e.At.IsZero() }

func (e Expiry) check() error {
	if e.IsZero() {
		return nil
	}
	switch e.Then {
	case ExpireDelete, ExpirePause, ExpireHibernate:
		return nil
	}
	return errdefs.InvalidArgument("expiry step %s is not %q, %q or %q", quoteShort(e.Then), ExpireDelete, ExpirePause, ExpireHibernate)
}

func (e Expiry) label() string {
	if e.IsZero() {
		return "{}"
	}
	e.At = e.At.UTC().Truncate(time.Millisecond)
	b, _ := json.Marshal(e)
	return string(b)
}

// ExpiryLabels are the labels a backend stamps for spec's expiry (none
// for a zero one).
func ExpiryLabels(spec Spec) map[string]string {
	if spec.Expiry.IsZero() {
		return nil
	}
	return map[string]string{LabelExpiry: spec.Expiry.label()}
}

// ExpiryOf is info's expiry; set is false when the sandbox never had one
// (no label), true also for one cleared since.
func ExpiryOf(info Info) (e Expiry, set bool, err error) {
	raw, ok := info.Labels[LabelExpiry]
	if !ok || raw == "" {
		return Expiry{}, false, nil
	}
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		return Expiry{}, true, fmt.Errorf("the expiry label of sandbox %s does not parse (%v)", info.ID, err)
	}
	return e, true, e.check()
}

// ExpiryRecorder is an optional Backend capability, for a backend that
// cannot change labels (Docker): it keeps a sandbox's expiry label
// (value) in a record of its own, which List and Inspect then report as
// LabelExpiry, to every replica and after a restart.
type ExpiryRecorder interface {
	RecordExpiry(ctx context.Context, id, value string) error
}

// SetExpiry changes the tenant's sandbox id's expiry (zero clears it), in
// the engine and in the manager's map at once, under the conversation's
// lock, so that the reaper never takes a step on an expiry being changed.
func (m *Manager) SetExpiry(ctx context.Context, tenant, id string, e Expiry) error {
	if err := e.check(); err != nil {
		return err
	}
	m.mu.Lock()
	ent := m.byID[id]
	mine := ent != nil && ent.info.Tenant == tenant && !ent.removing
	var conv string
	if mine {
		conv = ent.info.Conversation
	}
	m.mu.Unlock()
	if !mine {
		return errNoSandbox(id)
	}
	unlock, err := m.convLocks.lock(ctx, convKey(tenant, conv))
	if err != nil {
		return errdefs.DeadlineExceeded("waiting for another operation on conversation %s: %v; retry", conv, err)
	}
	defer unlock()
	return m.writeExpiry(ctx, id, e)
}

// writeExpiry keeps e on sandbox id: in the engine first, then in its
// entry, marked so that a listing made before the write does not bring
// the old one back.
func (m *Manager) writeExpiry(ctx context.Context, id string, e Expiry) error {
	value := e.label()
	var err error
	switch b := m.backend.(type) {
	case ExpiryRecorder:
		err = b.RecordExpiry(ctx, id, value)
	case Annotator:
		err = b.Annotate(ctx, id, LabelExpiry, value)
	default:
		return errdefs.FailedPrecondition("the %s backend cannot change a sandbox's expiry after creation", m.name)
	}
	if err != nil {
		return m.backendErr("set the expiry of sandbox "+id, err)
	}
	m.mu.Lock()
	if ent := m.byID[id]; ent != nil {
		info := ent.info
		info.Labels = maps.Clone(info.Labels)
		if info.Labels == nil {
			info.Labels = map[string]string{}
		}
		info.Labels[LabelExpiry] = value
		ent.setInfo(info)
		ent.expiryWritten = time.Now()
		ent.expiryRetry = time.Time{}
	}
	m.mu.Unlock()
	return nil
}

// expiryRetryAfter is how long a step the engine refused waits before it
// is tried again: not every pass of the reaper.
const expiryRetryAfter = time.Minute

// dueExpiries are the sandboxes whose expiry has come and may be tried.
// The clock is read only once some sandbox has an expiry. The caller
// holds m.mu.
func (m *Manager) dueExpiriesLocked() []Info {
	var out []Info
	var now time.Time
	for _, e := range m.byID {
		if e.removing || e.info.Conversation == "" || e.expiry.IsZero() {
			continue
		}
		if now.IsZero() {
			now = m.opts.now()
		}
		if now.Before(e.expiry.At) || now.Before(e.expiryRetry) {
			continue
		}
		out = append(out, e.info)
	}
	return out
}

// expire takes info's expiry step under its conversation's lock and the
// reap gate, reading the expiry again from the engine once both are held
// (a change made meanwhile, here or by a previous owner, wins). A pause or a
// hibernation clears the expiry once taken (or when the sandbox is not in
// a state to take it: it was paused otherwise), so that a sandbox resumed
// later is not stopped again by a time already past.
func (m *Manager) expire(ctx context.Context, info Info) {
	unlock, err := m.convLocks.lock(ctx, convKey(info.Tenant, info.Conversation))
	if err != nil {
		return
	}
	defer unlock()
	if gate := m.opts.reapGate; gate != nil {
		release, ok := gate(ctx, info)
		if !ok {
			return
		}
		if release != nil {
			defer release()
		}
	}
	now := m.opts.now()
	fresh, err := m.backend.Inspect(ctx, info.ID)
	m.mu.Lock()
	e := m.byID[info.ID]
	if e == nil || e.removing {
		m.mu.Unlock()
		return
	}
	if err != nil {
		// Gone (the next refresh drops it) or the engine does not answer.
		e.expiryRetry = now.Add(expiryRetryAfter)
		m.mu.Unlock()
		return
	}
	e.setInfo(fresh)
	if e.expiry.IsZero() || now.Before(e.expiry.At) {
		m.mu.Unlock()
		return
	}
	cur, exp := e.info, e.expiry
	m.mu.Unlock()

	_, canPause := m.backend.(Freezer)
	_, canHibernate := m.backend.(Hibernator)
	var step error
	switch {
	case exp.Then == ExpireDelete:
		if step = m.remove(ctx, cur.ID); step == nil {
			m.log.Info("deleted a sandbox at its expiry", "id", cur.ID, "tenant", cur.Tenant, "conversation", cur.Conversation, "expiry", exp.At)
			return
		}
	case exp.Then == ExpirePause && cur.State == StateRunning && canPause:
		step = m.stepTo(ctx, cur, StatePaused, func() error { return m.backend.(Freezer).Pause(ctx, cur.ID) })
	case exp.Then == ExpireHibernate && (cur.State == StateRunning || cur.State == StatePaused) && canHibernate && m.canHibernate(cur):
		m.Detach(cur.ID, "hibernating at its expiry")
		step = m.stepTo(ctx, cur, StateHibernated, func() error { return m.backend.(Hibernator).Hibernate(ctx, cur.ID) })
	case cur.State == StateRunning:
		// Running, and the step cannot be taken here: the nearest one
		// the backend has (a pause without a freezer is a hibernation).
		switch {
		case canHibernate && m.canHibernate(cur):
			m.Detach(cur.ID, "hibernating at its expiry")
			step = m.stepTo(ctx, cur, StateHibernated, func() error { return m.backend.(Hibernator).Hibernate(ctx, cur.ID) })
		case canPause:
			step = m.stepTo(ctx, cur, StatePaused, func() error { return m.backend.(Freezer).Pause(ctx, cur.ID) })
		default:
			step = errdefs.FailedPrecondition("the %s backend can neither pause nor hibernate a sandbox", m.name)
		}
	}
	if step != nil {
		m.log.Warn("cannot take a sandbox's expiry step; it is tried again later", "id", cur.ID, "conversation", cur.Conversation,
			"then", exp.Then, "retry_in", expiryRetryAfter, "err", step)
		m.mu.Lock()
		if e := m.byID[cur.ID]; e != nil {
			e.expiryRetry = now.Add(expiryRetryAfter)
		}
		m.mu.Unlock()
		return
	}
	if err := m.writeExpiry(ctx, cur.ID, Expiry{}); err != nil {
		m.log.Warn("a sandbox's expiry was taken but cannot be cleared; a resume may stop it again", "id", cur.ID, "err", err)
		m.mu.Lock()
		if e := m.byID[cur.ID]; e != nil {
			e.expiryRetry = now.Add(expiryRetryAfter)
		}
		m.mu.Unlock()
	}
}

// validLabels checks spec's own labels: under LabelExtPrefix, and small
// enough for every engine.
func validLabels(spec Spec) error {
	for k, v := range spec.Labels {
		if !strings.HasPrefix(k, LabelExtPrefix) || len(k) == len(LabelExtPrefix) {
			return errdefs.InvalidArgument("label %s is not under %q", quoteShort(k), LabelExtPrefix)
		}
		if len(k)+len(v) > MaxLabelBytes {
			return errdefs.InvalidArgument("label %s holds %d bytes; a sandbox's label holds at most %d", quoteShort(k), len(k)+len(v), MaxLabelBytes)
		}
	}
	return nil
}

// LabelExtPrefix starts the keys of Spec.Labels, the labels a front end
// keeps on its sandboxes (package e2b's).
const LabelExtPrefix = "io.sandboxd.x."

// MaxLabelBytes caps a label of Spec.Labels, key and value: containerd
// refuses a label over 4096 bytes; Docker and Kubernetes (an annotation
// there) take more.
const MaxLabelBytes = 4000

// ExtLabels are info's labels under LabelExtPrefix (nil without any).
func ExtLabels(info Info) map[string]string {
	var out map[string]string
	for k, v := range info.Labels {
		if strings.HasPrefix(k, LabelExtPrefix) {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// ExtLabelsOf are the labels a backend stamps for spec's own labels.
func ExtLabelsOf(spec Spec) map[string]string { return maps.Clone(spec.Labels) }

// withLabel is info with labels[key] = value ("" removes it).
func withLabel(info Info, key, value string) Info {
	info.Labels = maps.Clone(info.Labels)
	if info.Labels == nil {
		info.Labels = map[string]string{}
	}
	if value == "" {
		delete(info.Labels, key)
	} else {
		info.Labels[key] = value
	}
	return info
}

// ClaimLabels are the labels a claim of a warm pool sandbox stamps for
// spec beyond its owner, as its creation would have: the expiry and the
// front end's own labels.
func ClaimLabels(spec Spec) map[string]string {
	out := ExtLabelsOf(spec)
	if e := ExpiryLabels(spec); e != nil {
		if out == nil {
			out = map[string]string{}
		}
		maps.Copy(out, e)
	}
	return out
}

// IsClaimLabel reports whether key is one ClaimLabels may hold.
func IsClaimLabel(key string) bool {
	return key == LabelExpiry || strings.HasPrefix(key, LabelExtPrefix)
}
