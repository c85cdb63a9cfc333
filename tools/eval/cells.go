package eval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
)

// The kernels of a sandbox for a caller other than the eval tool: the code
// interpreter API (package e2b/interp), which runs cells in the same
// kernels — a conversation's own kernel of a language, or a kernel of its
// own per context — and takes every MIME type of their output.

// Labels on a context's kernel process: its id and its working folder, so
// that a restarted sandboxd finds the context again.
const (
	LabelContext    = "sandboxd.kernel.context"
	LabelContextDir = "sandboxd.kernel.cwd"
)

// Target names one kernel in a sandbox.
type Target struct {
	Agent        *agent.Client
	SandboxID    string
	Tenant       string
	Conversation string
	// Dir is the working folder a new kernel starts in.
	Dir string
	// Context names a kernel of its own; "" is the conversation's kernel
	// of the language, the one the eval tool runs.
	Context string
}

// CellOutput is one piece of a cell's output: Stream text ("stdout" or
// "stderr"), or a display's MIME bundle (Stream "") whose binary types are
// base64 and whose JSON types are JSON text. Main marks the value of the
// cell's last expression.
type CellOutput struct {
	Stream string
	Text   string
	Data   map[string]string
	Main   bool
}

// CellEnd is how a cell ended. Name is empty when it ran to its end; else
// Name and Value say what stopped it (the exception's class and message,
// or sandboxd's own TimeoutError, KernelDied, KernelRestarted) and
// Traceback is the kernel's account of it.
type CellEnd struct {
	Count                  int
	Name, Value, Traceback string
}

func (t *Tool) targetPlace(tg Target) *place {
	p := &place{key: "sandbox/" + tg.SandboxID, agent: tg.Agent, root: SandboxKernelRoot, dir: tg.Dir}
	if tg.Context == "" {
		p.owner = ownerOf(tg.Tenant, tg.Conversation, "")
		return p
	}
	h := sha256.New()
	fmt.Fprintf(h, "context\x00%s\x00%s\x00%s", tg.Tenant, tg.SandboxID, tg.Context)
	p.owner = hex.EncodeToString(h.Sum(nil))[:16]
	p.context = tg.Context
	p.extra = map[string]string{LabelContext: tg.Context, LabelContextDir: tg.Dir}
	return p
}

// MaxBudget is the longest a cell may run (eval's largest timeout_s).
func (t *Tool) MaxBudget() time.Duration { return t.cfg.maxBudget }

// StartKernel starts the target's kernel of lang unless it runs.
func (t *Tool) StartKernel(ctx context.Context, tg Target, lang string) error {
	_, _, err := t.pool.get(ctx, t.targetPlace(tg), lang)
	return err
}

// RestartKernel kills the target's kernel of lang and starts a clean one.
func (t *Tool) RestartKernel(ctx context.Context, tg Target, lang string) error {
	return t.pool.replace(ctx, t.targetPlace(tg), lang)
}

// StopKernel kills the target's kernel of lang; its end is no death to
// report, and the next cell starts a clean kernel.
func (t *Tool) StopKernel(ctx context.Context, tg Target, lang string) error {
	return t.pool.stop(ctx, t.targetPlace(tg), lang)
}

// ContextKernel is a context's kernel as the sandbox's agent lists it.
type ContextKernel struct {
	ID, Language, Dir string
	Running           bool
}

// ContextKernels lists the context kernels the agent c knows of (running,
// or ended and not stopped by StopKernel), one per context.
func (t *Tool) ContextKernels(ctx context.Context, c *agent.Client) ([]ContextKernel, error) {
	var out []ContextKernel
	seen := map[string]int{}
	for _, lang := range Languages() {
		procs, err := c.List(ctx, &proto.ListRequest{Labels: map[string]string{labelKernel: lang}})
		if err != nil {
			return nil, err
		}
		for _, p := range procs {
			id := p.Labels[LabelContext]
			if id == "" || t.pool.wasStopped(p.ID) {
				continue
			}
			k := ContextKernel{ID: id, Language: lang, Dir: p.Labels[LabelContextDir], Running: p.Running}
			if i, ok := seen[id]; ok {
				if p.Running {
					out[i] = k
				}
				continue
			}
			seen[id] = len(out)
			out = append(out, k)
		}
	}
	return out, nil
}

// RunCell runs code in the target's kernel of lang (starting it if need
// be) with env set for the cell only, and hands emit its output as it
// comes. The cell is interrupted when budget runs out (at most MaxBudget)
// or ctx ends; after ctx ended the error is ctx's. An error means the cell
// did not run: the kernel could not be reached or started.
func (t *Tool) RunCell(ctx context.Context, tg Target, lang, code string, env map[string]string, budget time.Duration, emit func(CellOutput)) (CellEnd, error) {
	if budget <= 0 || budget > t.cfg.maxBudget {
		budget = t.cfg.maxBudget
	}
	p := t.targetPlace(tg)
	k, died, err := t.pool.get(ctx, p, lang)
	if err != nil {
		return CellEnd{}, err
	}
	if died != "" {
		return CellEnd{Name: "KernelDied", Value: died + ". " + notRun}, nil
	}
	run := k.execute(ctx, message{Code: code, Env: env, Bundle: "full"}, budget, t.cfg.grace, emitSink(emit), noBridge)
	end := CellEnd{Count: run.count}
	switch run.end {
	case endDone:
		if run.status == "ok" {
			return end, nil
		}
		end.Name, end.Value, end.Traceback = run.ename, run.evalue, run.errText
		if end.Name == "" {
			end.Name, end.Value = "Error", run.errText
		}
		return end, nil
	case endInterrupted:
		if ctx.Err() != nil {
			return end, ctx.Err()
		}
		end.Name = "TimeoutError"
		end.Value = fmt.Sprintf("the cell ran past its time limit of %s and was interrupted; the context and its variables are kept", budget)
		end.Traceback = run.errText
		return end, nil
	case endStuck:
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.cfg.startTO)
		defer cancel()
		end.Name = "KernelRestarted"
		if err := t.pool.replace(rctx, p, lang); err != nil {
			end.Value = fmt.Sprintf("the cell did not stop within %s of its interrupt, so its kernel was killed and the context's state is lost; a new kernel could not be started: %v", t.cfg.grace, err)
		} else {
			end.Value = fmt.Sprintf("the cell did not stop within %s of its interrupt, so its kernel was restarted: the context's state is lost; a new kernel is ready", t.cfg.grace)
		}
		if ctx.Err() != nil {
			return end, ctx.Err()
		}
		return end, nil
	default: // endGone
		end.Name = "KernelDied"
		end.Value = t.goneCell(ctx, p, lang, k)
		return end, nil
	}
}

// goneCell tells what happened to a kernel whose pipe ended during a cell,
// and starts a new one when it died.
func (t *Tool) goneCell(ctx context.Context, p *place, lang string, k *kernel) string {
	t.pool.forget(p, lang, k)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.cfg.startTO)
	defer cancel()
	info, err := k.agent.Wait(wctx, &proto.WaitRequest{ID: k.proc.ID, Timeout: 2 * time.Second})
	if err != nil || info.Running {
		return "the connection to the kernel dropped while the cell ran; its output is lost (the cell was not re-run). The kernel may still be running: run code again to reconnect"
	}
	if err := t.pool.replace(wctx, p, lang); err != nil {
		return fmt.Sprintf("%s while running this cell; a new kernel could not be started: %v", deathCause(*info), err)
	}
	return deathNote(*info) + ". It died while running this cell; the cell was not re-run"
}

// emitSink hands a cell's output to a function.
type emitSink func(CellOutput)

func (e emitSink) stream(name, text string) {
	if text != "" {
		e(CellOutput{Stream: name, Text: text})
	}
}

func (e emitSink) show(m message) {
	if len(m.Data) > 0 {
		e(CellOutput{Data: m.Data, Main: m.Main})
	}
}

// noBridge answers tool() from a cell run through the code interpreter
// API: there is no run whose tools it could call.
func noBridge(context.Context, string, json.RawMessage) message {
	return message{IsError: true, Content: []toolBlock{{Type: "text", Text: "tool() is not available in code run through the code interpreter API: there is no agent run whose tools it could call"}}}
}
