package eval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/jail"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/kernels"
)

// Labels on kernel processes; a restarted sandboxd finds its kernels by them.
const (
	labelKernel = "sandboxd.kernel"       // the language
	labelOwner  = "sandboxd.kernel.owner" // hash of tenant and conversation
	// labelJail marks a host kernel that runs confined; a host kernel
	// without it (started by an older sandboxd) is killed, never used.
	labelJail = "sandboxd.kernel.jail"
)

// place is where one conversation's kernels run: its sandbox, or the host.
type place struct {
	key   string // "sandbox/<id>" or "host"
	agent *agent.Client
	root  string // the directory kernel programs are written under (a Root for the agent)
	dir   string // the working directory of a new kernel
	host  bool   // the host agent is shared by conversations, so names carry the owner
	owner string
	// jail gives a host kernel's confinement (host places only).
	jail func() (*jail.Spec, error)
	// context names a code interpreter context's own kernel ("" for the
	// conversation's); extra are labels it carries besides the kernel's.
	context string
	extra   map[string]string
}

func (p *place) name(lang string) string {
	switch {
	case p.host:
		return "kernel/" + lang + "/" + p.owner
	case p.context != "":
		return "kernel/" + lang + "/context/" + p.context
	}
	return "kernel/" + lang
}

func (p *place) labels(lang string) map[string]string {
	l := map[string]string{labelKernel: lang, labelOwner: p.owner}
	for k, v := range p.extra {
		l[k] = v
	}
	return l
}

func ownerOf(tenant, conversation, runID string) string {
	h := sha256.New()
	if conversation == "" {
		fmt.Fprintf(h, "run\x00%s", runID)
	} else {
		fmt.Fprintf(h, "conv\x00%s\x00%s", tenant, conversation)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// pool maps (place, owner, language) to the kernel sandboxd is attached to.
// It starts no goroutines of its own; each kernel has its readers.
type pool struct {
	interp  map[string]string // language -> interpreter command
	startTO time.Duration

	// mu guards kernels and ended.
	mu      sync.Mutex
	kernels map[string]*kernel
	// ended holds the process ids of kernels killed because their
	// conversation's last run ended: their exit is no death to report.
	ended map[string]bool
}

// maxEnded bounds ended; the agent forgets exited processes long before.
const maxEnded = 4096

func newPool(interp map[string]string, startTimeout time.Duration) *pool {
	return &pool{interp: interp, startTO: startTimeout, kernels: map[string]*kernel{}, ended: map[string]bool{}}
}

func poolKey(p *place, lang string) string { return p.key + "\x00" + p.owner + "\x00" + lang }

// get returns the conversation's kernel for lang, attaching to a running one
// or starting one. died is set when the kernel the conversation had is found
// dead: a new one was started, and the caller must report it and not run
// the cell.
func (pl *pool) get(ctx context.Context, p *place, lang string) (k *kernel, died string, err error) {
	key := poolKey(p, lang)
	pl.mu.Lock()
	defer pl.mu.Unlock()
	old := pl.kernels[key]
	if old != nil && old.agent == p.agent && !old.gone() {
		return old, "", nil
	}
	procs, err := p.agent.List(ctx, &proto.ListRequest{Labels: p.labels(lang)})
	if err != nil {
		return nil, "", err
	}
	var running, exited *proto.ProcessInfo
	for i := range procs {
		if p.host && procs[i].Running && procs[i].Labels[labelJail] == "" {
			killProc(ctx, p.agent, procs[i].ID) // unconfined: never attach to it
			continue
		}
		if procs[i].Running {
			running = &procs[i]
		} else if !pl.ended[procs[i].ID] {
			exited = &procs[i]
		}
	}
	if old != nil {
		old.close()
		delete(pl.kernels, key)
	}
	if running != nil {
		k, err := attachKernel(ctx, p.agent, lang, *running)
		if err != nil {
			return nil, "", err
		}
		pl.kernels[key] = k
		return k, "", nil
	}
	if exited != nil {
		died = deathNote(*exited)
	}
	k, err = pl.spawnLocked(ctx, p, lang)
	if err != nil {
		if died != "" {
			return nil, "", fmt.Errorf("%s, and a new kernel could not be started: %w", died, err)
		}
		return nil, "", err
	}
	return k, died, nil
}

// reset kills the conversation's kernel (its whole process group) and starts
// a clean one.
func (pl *pool) reset(ctx context.Context, p *place, lang string) (*kernel, error) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.killLocked(ctx, p, lang)
	return pl.spawnLocked(ctx, p, lang)
}

// replace is reset after a kernel died or would not stop.
func (pl *pool) replace(ctx context.Context, p *place, lang string) error {
	_, err := pl.reset(ctx, p, lang)
	return err
}

func (pl *pool) killLocked(ctx context.Context, p *place, lang string) {
	key := poolKey(p, lang)
	if old := pl.kernels[key]; old != nil {
		old.close()
		delete(pl.kernels, key)
	}
	procs, err := p.agent.List(ctx, &proto.ListRequest{Labels: p.labels(lang)})
	if err != nil {
		return
	}
	for _, pr := range procs {
		if pr.Running {
			killProc(ctx, p.agent, pr.ID)
		}
	}
}

// killProc kills a kernel's process group (for a host kernel: its jail,
// and with the jail's init its whole PID namespace) and waits for it.
func killProc(ctx context.Context, c *agent.Client, id string) {
	_ = c.Signal(ctx, &proto.SignalRequest{ID: id, Signal: "KILL", Group: true})
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, _ = c.Wait(wctx, &proto.WaitRequest{ID: id, Timeout: 5 * time.Second})
}

func (pl *pool) spawnLocked(ctx context.Context, p *place, lang string) (*kernel, error) {
	prog, err := kernels.Get(lang)
	if err != nil {
		return nil, errdefs.InvalidArgument("%v", err)
	}
	dir := path.Join(p.root, prog.Hash)
	entry := path.Join(dir, prog.Entry)
	if _, err := p.agent.Stat(ctx, &proto.StatRequest{Root: p.root, Path: entry}); err != nil {
		// Not there yet (or the root itself is missing): make the root, then write.
		mk := []string{"mkdir", "-p", p.root}
		if p.host {
			mk = append(mk, p.dir)
		}
		if r, err := p.agent.Exec(ctx, &proto.ExecRequest{Argv: mk, Timeout: 10 * time.Second}); err != nil || r.ExitCode != 0 {
			return nil, fmt.Errorf("cannot make the kernel folder %s: %v %s", p.root, err, execErr(r))
		}
		wr := &proto.WriteFilesRequest{Root: p.root}
		for name, data := range prog.Files {
			wr.Files = append(wr.Files, proto.WriteFile{Path: path.Join(dir, name), Data: data, MkdirAll: true, Mode: 0o644})
		}
		if err := p.agent.WriteFiles(ctx, wr); err != nil {
			return nil, fmt.Errorf("cannot write the kernel files into %s: %w", dir, err)
		}
	}
	if p.host {
		if r, err := p.agent.Exec(ctx, &proto.ExecRequest{Argv: []string{"mkdir", "-p", p.dir}, Timeout: 10 * time.Second}); err != nil || r.ExitCode != 0 {
			return nil, fmt.Errorf("cannot make the host kernel's folder %s: %v %s", p.dir, err, execErr(r))
		}
	}
	env := map[string]string{"PYTHONUNBUFFERED": "1", "PYTHONIOENCODING": "utf-8", "MPLBACKEND": "module://sandboxd_mpl", "TERM": "dumb", "NO_COLOR": "1"}
	req := &proto.SpawnRequest{
		Name:       p.name(lang),
		Argv:       []string{pl.interp[lang], entry},
		Dir:        p.dir,
		Env:        env,
		Labels:     p.labels(lang),
		ExtraPipes: 1,
	}
	if p.host {
		if err := confine(p, req, dir); err != nil {
			return nil, err
		}
	}
	info, err := p.agent.Spawn(ctx, req)
	if err != nil {
		if errors.Is(err, errdefs.ErrFailedPrecondition) || errors.Is(err, errdefs.ErrNotFound) || errors.Is(err, errdefs.ErrInvalidArgument) {
			return nil, errdefs.FailedPrecondition("the %s kernel cannot start: %v; %s must be installed where the kernel runs", lang, err, pl.interp[lang])
		}
		return nil, err
	}
	k, err := attachKernel(ctx, p.agent, lang, *info)
	if err != nil {
		return nil, err
	}
	if err := k.waitHello(ctx, pl.startTO); err != nil {
		k.close()
		_ = p.agent.Signal(context.WithoutCancel(ctx), &proto.SignalRequest{ID: info.ID, Signal: "KILL", Group: true})
		msg := strings.TrimSpace(string(k.takeFdOut()))
		if why := jailWords(msg); why != "" {
			return nil, errdefs.FailedPrecondition("the %s kernel cannot run on the host: %s; eval runs only in a sandbox here: create one for this conversation", lang, why)
		}
		if len(msg) > 2000 {
			msg = "..." + msg[len(msg)-2000:]
		}
		if msg != "" {
			return nil, errdefs.FailedPrecondition("the %s kernel failed to start (%v): %s", lang, err, msg)
		}
		return nil, errdefs.FailedPrecondition("the %s kernel failed to start: %v", lang, err)
	}
	pl.kernels[poolKey(p, lang)] = k
	return k, nil
}

// forget drops the attachment to a kernel (its pipe is gone); the next get
// re-attaches or reports it dead.
func (pl *pool) forget(p *place, lang string, k *kernel) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	key := poolKey(p, lang)
	if pl.kernels[key] == k {
		k.close()
		delete(pl.kernels, key)
	}
}

// closeAll closes every attachment; the kernels keep running in the agent.
func (pl *pool) closeAll() {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for key, k := range pl.kernels {
		k.close()
		delete(pl.kernels, key)
	}
}

// deathNote says how a kernel ended and that a new one is ready.
func deathNote(p proto.ProcessInfo) string {
	if p.Hibernated {
		return deathCause(p) + ": its variables are gone; a new kernel is ready"
	}
	return deathCause(p) + "; its state is lost; a new kernel is ready"
}

// deathCause says how a kernel ended: a hibernation of its sandbox (no
// status of its own), or its exit status or signal.
func deathCause(p proto.ProcessInfo) string {
	switch {
	case p.Hibernated:
		return "the kernel was stopped when the sandbox hibernated"
	case p.Signal != "":
		return "kernel died: killed by signal " + p.Signal
	}
	return fmt.Sprintf("kernel died: exited with status %d", p.ExitCode)
}

func execErr(r *proto.ExecResponse) string {
	if r == nil {
		return ""
	}
	return strings.TrimSpace(string(r.Stderr))
}

// live counts the attached kernels whose pipe has not ended, by language.
func (pl *pool) live() map[string]int {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	out := map[string]int{}
	for _, k := range pl.kernels {
		if !k.gone() {
			out[k.lang]++
		}
	}
	return out
}

// killOwner kills every kernel of owner the agent c runs (each language),
// confined or not, and drops the attachments. It fails when the agent
// cannot list them, or one is still running after its kill.
func (pl *pool) killOwner(ctx context.Context, c *agent.Client, key, owner string) error {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for k, kern := range pl.kernels {
		if strings.HasPrefix(k, key+"\x00"+owner+"\x00") {
			kern.close()
			delete(pl.kernels, k)
		}
	}
	procs, err := c.List(ctx, &proto.ListRequest{Labels: map[string]string{labelOwner: owner}})
	if err != nil {
		return fmt.Errorf("cannot list the host kernels to stop them: %w", err)
	}
	for _, pr := range procs {
		if pr.Labels[labelKernel] == "" {
			continue
		}
		// This kernel, and those that died before it, are done with.
		if len(pl.ended) >= maxEnded {
			clear(pl.ended)
		}
		pl.ended[pr.ID] = true
		if pr.Running {
			killProc(ctx, c, pr.ID)
			if info, err := c.Wait(ctx, &proto.WaitRequest{ID: pr.ID, Timeout: time.Second}); err != nil || info.Running {
				return fmt.Errorf("the host kernel %s did not stop after its kill", pr.Name)
			}
		}
	}
	return nil
}

// stop kills p's kernel of lang and drops its attachment; the kernel it
// was, and any before it, are done with (no death to report, not listed).
func (pl *pool) stop(ctx context.Context, p *place, lang string) error {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	key := poolKey(p, lang)
	if old := pl.kernels[key]; old != nil {
		old.close()
		delete(pl.kernels, key)
	}
	procs, err := p.agent.List(ctx, &proto.ListRequest{Labels: p.labels(lang)})
	if err != nil {
		return fmt.Errorf("cannot list the kernels to stop them: %w", err)
	}
	for _, pr := range procs {
		if len(pl.ended) >= maxEnded {
			clear(pl.ended)
		}
		pl.ended[pr.ID] = true
		if pr.Running {
			killProc(ctx, p.agent, pr.ID)
		}
	}
	return nil
}

// wasStopped reports whether the kernel process id was stopped on purpose.
func (pl *pool) wasStopped(id string) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.ended[id]
}
