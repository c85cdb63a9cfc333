package eval

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/tools"
)

// message is one line of the kernel protocol (both directions).
type message struct {
	Type string `json:"type"`
	ID   int64  `json:"id,omitempty"`
	// Cell names the cell a kernel message belongs to (0 from older kernels).
	Cell int64 `json:"cell,omitempty"`
	// execute
	Code string `json:"code,omitempty"`
	// Env is set for the cell only; Bundle "full" asks for every MIME type
	// of each display (the code interpreter API) instead of eval's few.
	Env    map[string]string `json:"env,omitempty"`
	Bundle string            `json:"bundle,omitempty"`
	// stream
	Name string `json:"name,omitempty"`
	Text string `json:"text,omitempty"`
	// display; Main marks the cell's last expression (not a display() call)
	Data map[string]string `json:"data,omitempty"`
	Main bool              `json:"main,omitempty"`
	// tool_call / tool_result
	Call    int64           `json:"call,omitempty"`
	Args    json.RawMessage `json:"args,omitempty"`
	Content []toolBlock     `json:"content,omitempty"`
	IsError bool            `json:"is_error,omitempty"`
	// done
	Status string `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
	// Ename and Evalue are a failed cell's exception class and message
	// (absent from older kernels); Error is its whole traceback.
	Ename  string `json:"ename,omitempty"`
	Evalue string `json:"evalue,omitempty"`
	// ExecutionCount is the kernel's count of cells run, this one included
	// (0 from an older kernel).
	ExecutionCount int `json:"execution_count,omitempty"`
	// hello
	Language string `json:"language,omitempty"`
	Version  string `json:"version,omitempty"`
	PID      int    `json:"pid,omitempty"`
}

type toolBlock struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	MimeType string `json:"mime_type,omitempty"`
	Data     string `json:"data,omitempty"`
}

// maxLine caps one protocol line from a kernel (a big PNG fits).
const maxLine = 64 << 20

// kernel is one kernel process as seen through one agent session.
//
// Goroutines: one reader per attachment decodes fd 4 into msgs and closes
// it at EOF; two drainers copy the process's own stdout/stderr (output of
// subprocesses and C code, which bypasses the kernel's capture) into fdOut.
// close() closes the attachments, which ends all three.
type kernel struct {
	lang  string
	agent *agent.Client
	proc  proto.ProcessInfo
	in    io.WriteCloser // fd 3
	msgs  chan message   // closed when fd 4 ends
	ended chan struct{}  // closed with msgs; gone() reads it without taking messages
	quit  chan struct{}  // closed by close(): the reader stops waiting to deliver
	once  sync.Once
	atts  []io.Closer

	// writeMu serializes writes to fd 3 (one writer per protocol pipe).
	writeMu sync.Mutex

	// fdMu guards fdOut.
	fdMu  sync.Mutex
	fdOut []byte
	// drains counts the running drainers; drained is closed when both end.
	drains  sync.WaitGroup
	drained chan struct{}

	// execMu makes cells of this kernel run one at a time.
	execMu sync.Mutex
	// seq numbers cells from a random start, so that a message a restarted
	// sandboxd gets twice (the agent resends what a dying session may not
	// have read) never matches a cell of this attachment. Kept under 2^50:
	// JavaScript reads it as a double.
	seq int64 // guarded by execMu
}

// attachKernel connects to a running kernel process's pipes. A new attach
// replaces an older one (a restarted sandboxd, a new pipe).
func attachKernel(ctx context.Context, c *agent.Client, lang string, p proto.ProcessInfo) (*kernel, error) {
	k := &kernel{lang: lang, agent: c, proc: p, msgs: make(chan message, 64), ended: make(chan struct{}), quit: make(chan struct{}), drained: make(chan struct{}),
		seq: newCellSeq()}
	in, err := c.Attach(ctx, p.ID, "fd3")
	if err != nil {
		return nil, err
	}
	k.in = in
	k.atts = append(k.atts, in)
	out, err := c.Attach(ctx, p.ID, "fd4")
	if err != nil {
		k.close()
		return nil, err
	}
	k.atts = append(k.atts, out)
	for _, s := range []string{"stdout", "stderr"} {
		rc, err := c.Attach(ctx, p.ID, s)
		if err != nil {
			k.close()
			return nil, err
		}
		k.atts = append(k.atts, rc)
		k.drains.Add(1)
		go k.drain(rc)
	}
	go func() {
		k.drains.Wait()
		close(k.drained)
	}()
	go k.read(out)
	return k, nil
}

// newCellSeq is where an attachment's cell numbers start: random, above 0
// and under 2^50.
func newCellSeq() int64 { return 1 + rand.Int64N(1<<50-1<<20) }

func (k *kernel) read(r io.Reader) {
	defer close(k.ended)
	defer close(k.msgs)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		var m message
		// A line cut by a re-attach (or anything not ours) is skipped.
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.Type == "" {
			continue
		}
		select {
		case k.msgs <- m:
		case <-k.quit:
			return
		}
	}
}

// fdOutCap bounds what is kept of the process's own stdout/stderr (the
// last bytes) between two cells; the cell's output caps apply after.
const fdOutCap = 256 << 10

// cellFdOut reports whether the process's own stdout/stderr belong in the
// cell's output. The Python kernel captures fds 1 and 2 itself, in order,
// and sends the agent only a copy of stderr for death reports; the Node
// kernel captures console output only, so a child's inherited output comes
// through the agent.
func (k *kernel) cellFdOut() bool { return k.lang != "python" }

func (k *kernel) drain(r io.Reader) {
	defer k.drains.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			k.fdMu.Lock()
			k.fdOut = append(k.fdOut, buf[:n]...)
			if over := len(k.fdOut) - fdOutCap; over > 0 {
				k.fdOut = append(k.fdOut[:0], k.fdOut[over:]...)
			}
			k.fdMu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// gone reports whether fd 4 has ended (the kernel died or the pipe dropped).
func (k *kernel) gone() bool {
	select {
	case <-k.ended:
		return true
	default:
		return false
	}
}

func (k *kernel) takeFdOut() []byte {
	k.fdMu.Lock()
	defer k.fdMu.Unlock()
	b := k.fdOut
	k.fdOut = nil
	return b
}

func (k *kernel) send(m message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	k.writeMu.Lock()
	defer k.writeMu.Unlock()
	_, err = k.in.Write(b)
	return err
}

// close detaches from the kernel's output streams and stops the reader.
// The fd 3 attachment is left open on purpose: closing it would give the
// kernel EOF, and a kernel that reads EOF exits. It ends with the session,
// or is replaced by the next attach, neither of which the kernel sees.
func (k *kernel) close() {
	k.once.Do(func() {
		close(k.quit)
		for _, a := range k.atts {
			if a != io.Closer(k.in) {
				a.Close()
			}
		}
	})
}

// waitHello reads the kernel's first message.
func (k *kernel) waitHello(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case m, ok := <-k.msgs:
			if !ok {
				return errors.New("the kernel exited before it was ready")
			}
			if m.Type == "hello" {
				return nil
			}
		case <-t.C:
			return fmt.Errorf("the kernel did not start within %s", d)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// bridgeFunc runs one tool() call from a cell.
type bridgeFunc func(ctx context.Context, name string, args json.RawMessage) message

// cellEnd says how a cell ended.
type cellEnd int

const (
	endDone        cellEnd = iota // the kernel reported done
	endInterrupted                // the budget ran out or the call was cancelled, and the kernel stopped the cell
	endStuck                      // the kernel did not stop after the interrupt
	endGone                       // fd 4 ended: the kernel died or the pipe dropped
)

// cellSink takes a cell's output as it comes.
type cellSink interface {
	stream(name, text string)
	show(m message) // a display message
}

func (o *output) show(m message) { o.display(m.Data) }

// cellRun is what one execute produced.
type cellRun struct {
	end     cellEnd
	status  string // the kernel's status when end is endDone or endInterrupted
	errText string
	// ename and evalue are the exception's class and message (a failed cell).
	ename, evalue string
	count         int // the kernel's execution_count of the cell (0 when it did not respond)
	out           cellSink
	elapsed       time.Duration
	budget        time.Duration
	started       time.Time // when the cell was sent
}

// execute runs one cell: req is its execute message (code, env, bundle);
// its id is set here. The budget counts down only while no tool() call is
// pending; when it runs out (or ctx ends) the kernel gets a SIGINT and the
// cell has grace to stop.
func (k *kernel) execute(ctx context.Context, req message, budget, grace time.Duration, out cellSink, bridge bridgeFunc) cellRun {
	k.execMu.Lock()
	defer k.execMu.Unlock()
	k.seq++
	id := k.seq
	start := time.Now()
	res := cellRun{out: out, budget: budget, started: start}
	if pre := k.takeFdOut(); len(pre) > 0 && k.cellFdOut() {
		out.stream("stdout", string(pre))
		tools.EmitOutput(ctx, "stdout", string(pre))
	}
	req.Type, req.ID = "execute", id
	if err := k.send(req); err != nil {
		res.end = endGone
		return res
	}
	timer := time.NewTimer(budget)
	defer timer.Stop()
	remaining := budget
	running := time.Now()
	var graceT *time.Timer
	var graceC <-chan time.Time
	interrupted := false
	interrupt := func() {
		if interrupted {
			return
		}
		interrupted = true
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = k.agent.Signal(sctx, &proto.SignalRequest{ID: k.proc.ID, Signal: "INT"})
		cancel()
		graceT = time.NewTimer(grace)
		graceC = graceT.C
	}
	defer func() {
		if graceT != nil {
			graceT.Stop()
		}
	}()
	ctxDone := ctx.Done()
	for {
		select {
		case m, ok := <-k.msgs:
			if !ok {
				res.end = endGone
				res.elapsed = time.Since(start)
				return res
			}
			if m.Cell != 0 && m.Cell != id {
				continue // output of another cell, delivered again after a reconnect
			}
			switch m.Type {
			case "stream":
				out.stream(m.Name, m.Text)
				tools.EmitOutput(ctx, m.Name, m.Text)
			case "display":
				out.show(m)
			case "tool_call":
				// The budget pauses while the call is pending.
				if timer.Stop() {
					remaining -= time.Since(running)
				}
				reply := bridge(ctx, m.Name, m.Args)
				reply.Type, reply.Call = "tool_result", m.Call
				if err := k.send(reply); err != nil {
					res.end = endGone
					return res
				}
				running = time.Now()
				if !interrupted {
					timer.Reset(max(remaining, 0))
				}
			case "done":
				if m.ID != id {
					continue // a late response to an earlier, abandoned cell
				}
				if k.cellFdOut() {
					if fd := k.takeFdOut(); len(fd) > 0 {
						out.stream("stdout", string(fd))
						tools.EmitOutput(ctx, "stdout", string(fd))
					}
				}
				res.status, res.errText, res.count = m.Status, m.Error, m.ExecutionCount
				res.ename, res.evalue = m.Ename, m.Evalue
				res.end = endDone
				if interrupted {
					res.end = endInterrupted
				}
				res.elapsed = time.Since(start)
				return res
			}
		case <-timer.C:
			interrupt()
		case <-ctxDone:
			ctxDone = nil
			interrupt()
		case <-graceC:
			res.end = endStuck
			res.elapsed = time.Since(start)
			return res
		}
	}
}
