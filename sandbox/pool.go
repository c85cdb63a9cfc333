package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/agent"
)

// PoolSpec configures one warm pool: Size generic sandboxes of Image kept
// started, with an agent pipe open that responded to a hello.
type PoolSpec struct {
	Image string
	Size  int
}

// Claim outcomes: the closed set of a pool claim's outcome.
const (
	// PoolClaimed: a warm sandbox was handed to the request.
	PoolClaimed = "claimed"
	// PoolEmpty: none was ready, so the request was created cold.
	PoolEmpty = "empty"
	// PoolFailed: warm ones were there but none passed the hello or the
	// engine's claim, so the request was created cold.
	PoolFailed = "failed"
)

// PoolOutcomes lists the claim outcomes, for metrics.
func PoolOutcomes() []string { return []string{PoolClaimed, PoolEmpty, PoolFailed} }

// PoolStat is one pool's state, for metrics and /readyz.
type PoolStat struct {
	Image          string
	Size           int
	Ready          int               // warm sandboxes waiting for a claim
	Claims         map[string]uint64 // by outcome, since start
	RefillFailures uint64            // sandboxes that could not be made or attached
	// Problem says why the pool cannot refill now ("" when it can): the
	// last refill's error until one succeeds.
	Problem string
}

// PoolKey is the LabelPool value of image's pool: "p-" and a short hash,
// a valid label value on every engine whatever the image name holds.
func PoolKey(image string) string {
	sum := sha256.Sum256([]byte(image))
	return "p-" + hex.EncodeToString(sum[:])[:20]
}

// Bounds of the refill.
const (
	// poolConcurrency caps the sandboxes one pool makes at once, so that a
	// big pool does not swamp the engine at start.
	poolConcurrency = 2
	// poolWarmTimeout bounds making and attaching one pool sandbox (a
	// Kubernetes pod may wait for its image).
	poolWarmTimeout = 5 * time.Minute
	// poolBackoffMin and poolBackoffMax bound the wait after a failed refill.
	poolBackoffMin = time.Second
	poolBackoffMax = time.Minute
	// poolCheckEvery is how often warm pipes are checked for drops.
	poolCheckEvery = 15 * time.Second
	// claimHelloTimeout bounds the hello a warm sandbox responds to before it
	// is handed out.
	claimHelloTimeout = 2 * time.Second
	// claimAttempts caps the warm sandboxes one request tries before it
	// falls back to a cold create.
	claimAttempts = 3
	// removeTimeout bounds removing a discarded pool sandbox.
	removeTimeout = 30 * time.Second
)

// pool is one warm pool's state. Its refiller goroutine (Manager.refill)
// tops it up; claims take from ready.
type pool struct {
	spec PoolSpec
	key  string
	kick chan struct{} // cap 1: wakes the refiller after a claim or a finished warm-up

	mu             sync.Mutex // guards the fields below
	ready          []warm     // oldest first
	warming        int        // warm-ups in flight
	claims         map[string]uint64
	refillFailures uint64
	problem        string
	failures       int       // consecutive, for the backoff
	retryAt        time.Time // no new warm-up before this after a failure
}

// warm is one pool sandbox waiting for a claim, with its open pipe.
type warm struct {
	info Info
	c    *agent.Client
}

func newPool(spec PoolSpec) *pool {
	return &pool{spec: spec, key: PoolKey(spec.Image), kick: make(chan struct{}, 1), claims: make(map[string]uint64)}
}

func (p *pool) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// take pops the oldest warm sandbox.
func (p *pool) take() (warm, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ready) == 0 {
		return warm{}, false
	}
	w := p.ready[0]
	p.ready = p.ready[1:]
	return w, true
}

// putBack returns w, taken but not handed out, to the front of ready.
func (p *pool) putBack(w warm) {
	p.mu.Lock()
	p.ready = append([]warm{w}, p.ready...)
	p.mu.Unlock()
}

func (p *pool) count(outcome string) {
	p.mu.Lock()
	p.claims[outcome]++
	p.mu.Unlock()
}

// toStart is how many warm-ups to start now, counted as in flight.
func (p *pool) toStart(now time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Before(p.retryAt) {
		return 0
	}
	n := min(p.spec.Size-len(p.ready)-p.warming, poolConcurrency-p.warming)
	if n <= 0 {
		return 0
	}
	p.warming += n
	return n
}

// retryIn is how long until the backoff allows a warm-up again; 0 when it
// does or none is wanted.
func (p *pool) retryIn(now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ready)+p.warming >= p.spec.Size || !now.Before(p.retryAt) {
		return 0
	}
	return p.retryAt.Sub(now)
}

// warmed records one warm-up's end: w joins ready, or err starts a backoff.
func (p *pool) warmed(w warm, err error, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.warming--
	if err != nil {
		p.failures++
		p.refillFailures++
		p.problem = err.Error()
		p.retryAt = now.Add(backoff(p.failures))
		return
	}
	p.failures, p.problem, p.retryAt = 0, "", time.Time{}
	p.ready = append(p.ready, w)
}

// abandoned records a warm-up given up on shutdown.
func (p *pool) abandoned() {
	p.mu.Lock()
	p.warming--
	p.mu.Unlock()
}

func backoff(failures int) time.Duration {
	d := poolBackoffMin
	for i := 1; i < failures && d < poolBackoffMax; i++ {
		d *= 2
	}
	return min(d, poolBackoffMax)
}

func (p *pool) stat() PoolStat {
	p.mu.Lock()
	defer p.mu.Unlock()
	claims := make(map[string]uint64, len(p.claims))
	for k, v := range p.claims {
		claims[k] = v
	}
	return PoolStat{Image: p.spec.Image, Size: p.spec.Size, Ready: len(p.ready), Claims: claims,
		RefillFailures: p.refillFailures, Problem: p.problem}
}

// PoolStats returns every pool's state, by image.
func (m *Manager) PoolStats() []PoolStat {
	out := make([]PoolStat, 0, len(m.pools))
	for _, p := range m.pools {
		out = append(out, p.stat())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Image < out[j].Image })
	return out
}

// PoolProblems says, one message per pool, why a pool cannot refill now;
// empty when every pool can. Cold creates work meanwhile.
func (m *Manager) PoolProblems() []string {
	var out []string
	for _, s := range m.PoolStats() {
		if s.Problem != "" {
			out = append(out, "pool "+s.Image+" cannot refill: "+s.Problem)
		}
	}
	return out
}
