package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// Fencing (proto.OpClaim): several sandboxd replicas may reach one agent,
// but only the one holding the conversation's Lease may act on it. Each
// claims its Lease's epoch on its session; the highest epoch wins, and the
// sessions it supersedes are closed once their running requests have
// ended, so that when a claim gets its response no request of an older owner —
// one paused past its Lease that resumes — runs or can start.

const (
	fenceFile = "fence.json"
	// drainTimeout bounds how long a claim waits for the requests of the
	// sessions it superseded to end after they were closed.
	drainTimeout = 10 * time.Second
)

// session is one yamux session and its claim.
type session struct {
	*yamux.Session
	// Guarded by fence.mu.
	holder     string
	epoch      int64
	superseded bool
	running    int           // requests being handled
	drained    chan struct{} // made when superseded; closed once running is 0
}

// fence is the highest claim the daemon accepted, and the service of
// claim. Every request is admitted through begin and end (Server.serveOne),
// so a claim knows when the requests of the sessions it superseded are
// done. It starts no goroutine: a claim waits, bounded, on its own
// request's goroutine.
type fence struct {
	path   string // the record in the state dir; "" keeps it in memory only
	broken error  // why the record cannot be read; every claim fails with it

	// mu guards holder, epoch, claimed and the claim fields of every session.
	mu      sync.Mutex
	holder  string // "": nobody claimed yet
	epoch   int64
	claimed map[*session]struct{} // sessions that claimed, until they end
}

type fenceRecord struct {
	Holder string `json:"holder"`
	Epoch  int64  `json:"epoch"`
}

// openFence loads the record a previous daemon left in stateDir ("": none).
func openFence(stateDir string) *fence {
	f := &fence{claimed: map[*session]struct{}{}}
	if stateDir == "" {
		return f
	}
	f.path = filepath.Join(stateDir, fenceFile)
	b, err := os.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return f
	}
	var r fenceRecord
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	if err != nil {
		f.broken = errdefs.Unavailable("the agent cannot read its fencing record %s (%v), so it cannot tell which sandboxd replica owns this sandbox; "+
			"fix the state directory, or remove the file once no other replica can still hold the sandbox", f.path, err)
		return f
	}
	f.holder, f.epoch = r.Holder, r.Epoch
	return f
}

// store writes the record atomically and durably: a daemon killed at any
// point finds either the old record or the new one.
func (f *fence) store(holder string, epoch int64) error {
	if f.path == "" {
		return nil
	}
	b, _ := json.Marshal(fenceRecord{Holder: holder, Epoch: epoch})
	return writeDurable(f.path, b)
}

var _ service = (*fence)(nil)

func (f *fence) register(t opTable) {
	addBody(t, proto.OpClaim, func(r *proto.Request) *proto.ClaimRequest { return r.Claim },
		func(_ context.Context, rq *request, r *proto.ClaimRequest) (*proto.Response, func(), error) {
			return &proto.Response{}, nil, f.claim(rq.sess, r)
		})
}

// begin admits one request on sess; a superseded session takes none.
func (f *fence) begin(sess *session) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if sess.superseded {
		return f.supersededErr(sess.holder, sess.epoch)
	}
	sess.running++
	return nil
}

// end is called when a request begun on sess has been handled.
func (f *fence) end(sess *session) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sess.running--
	if sess.superseded && sess.running == 0 {
		close(sess.drained)
	}
}

// forget drops an ended session.
func (f *fence) forget(sess *session) {
	f.mu.Lock()
	delete(f.claimed, sess)
	f.mu.Unlock()
}

// supersededErr refuses a claim (or a request) of holder at epoch; the
// caller holds mu.
func (f *fence) supersededErr(holder string, epoch int64) error {
	if epoch == f.epoch {
		return errdefs.FailedPrecondition("claim superseded: this sandbox was claimed by %s at epoch %d; %s cannot claim the same epoch, and whichever replica does not hold the sandbox's lease must stand down", f.holder, f.epoch, holder)
	}
	return errdefs.FailedPrecondition("claim superseded: this sandbox was claimed by %s at epoch %d; a replica holding epoch %d (%s) must stand down", f.holder, f.epoch, epoch, holder)
}

// claim makes sess the owner at epoch, or refuses. On success it closes
// every other session that claimed a lower epoch and waits until their
// requests have ended.
func (f *fence) claim(sess *session, r *proto.ClaimRequest) error {
	if r.Holder == "" || r.Epoch < 0 {
		return errdefs.InvalidArgument("a claim needs a holder and an epoch of 0 or more (got holder %q, epoch %d); send the replica's identity and its lease's transitions", r.Holder, r.Epoch)
	}
	f.mu.Lock()
	if f.broken != nil {
		f.mu.Unlock()
		return f.broken
	}
	if sess.superseded {
		err := f.supersededErr(sess.holder, sess.epoch)
		f.mu.Unlock()
		return err
	}
	if f.holder != "" && (r.Epoch < f.epoch || r.Epoch == f.epoch && r.Holder != f.holder) {
		err := f.supersededErr(r.Holder, r.Epoch)
		f.mu.Unlock()
		return err
	}
	if r.Epoch != f.epoch || r.Holder != f.holder {
		// Recorded before anyone is told: a restarted daemon must not
		// accept a claim this one refused.
		if err := f.store(r.Holder, r.Epoch); err != nil {
			f.mu.Unlock()
			return errdefs.Unavailable("the agent cannot record the claim of %s at epoch %d in %s (%v); check the agent's state directory and retry", r.Holder, r.Epoch, f.path, err)
		}
		f.holder, f.epoch = r.Holder, r.Epoch
	}
	sess.holder, sess.epoch = r.Holder, r.Epoch
	f.claimed[sess] = struct{}{}
	// Sessions superseded earlier are waited for again: a claim retried
	// after a slow drain returns only once they are done.
	var old []*session
	for o := range f.claimed {
		if o == sess || !o.superseded && o.epoch >= r.Epoch {
			continue
		}
		if !o.superseded {
			o.superseded = true
			o.drained = make(chan struct{})
			if o.running == 0 {
				close(o.drained)
			}
		}
		old = append(old, o)
	}
	f.mu.Unlock()

	for _, o := range old {
		o.Close()
	}
	timer := time.NewTimer(drainTimeout)
	defer timer.Stop()
	for _, o := range old {
		select {
		case <-o.drained:
		case <-timer.C:
			f.mu.Lock()
			n, holder, epoch := o.running, o.holder, o.epoch
			f.mu.Unlock()
			return errdefs.Unavailable("the claim of %s at epoch %d is recorded, but %d requests of %s (epoch %d) were still running %s after their session was closed; retry the claim", r.Holder, r.Epoch, n, holder, epoch, drainTimeout)
		}
	}
	return nil
}
