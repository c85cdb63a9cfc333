package proto

import "time"

// Long-lived processes (the "proc_" ops), for a daemon that says
// HelloResponse.Processes: the processes a `process` tool, the HTTP API and
// a terminal start, read and come back to. They are the daemon's, not a
// session's: a session that drops, a sandboxd that restarts or a replica
// that takes over finds them running, with their output kept. They end
// when they exit, are killed, or the daemon stops (the daemon kills them
// on its way out; they do not outlive it).
//
// A process's output (stdout and stderr, or a terminal's one stream) goes
// into a bounded ring with absolute byte offsets from 0. The process is
// never held back by a reader: when the ring is full the oldest bytes are
// dropped, and a reader asking from before the ring's start gets what is
// left and how many bytes it missed (Dropped). A reader that resumes with
// the cursor it was given (Next) gets no gap and no repeat.
//
// Ids are short, "p1", "p2", ..., never reused in the daemon's life; with a
// state dir the counter is kept there, so a restarted daemon does not give
// out an id a client may still hold either.
//
// These ops are apart from spawn/attach/signal/wait/list, which serve the
// eval kernels (whose output must never be lost, so a full buffer holds
// the process back) and address processes by other ids: op signal does not
// reach a proc_start process; proc_signal and proc_kill do.
const (
	OpProcStart  Op = "proc_start"  // ProcStartRequest -> ProcInfo (Response.Proc)
	OpProcGet    Op = "proc_get"    // ProcGetRequest -> ProcInfo (Response.Proc)
	OpProcList   Op = "proc_list"   // ProcListRequest -> ProcListResponse
	OpProcOutput Op = "proc_output" // ProcOutputRequest -> ProcOutputResponse
	OpProcFollow Op = "proc_follow" // ProcFollowRequest -> ProcInfo (Response.Proc), then ProcFrame frames
	OpProcInput  Op = "proc_input"  // ProcInputRequest -> Empty
	OpProcResize Op = "proc_resize" // ProcResizeRequest -> Empty
	OpProcSignal Op = "proc_signal" // ProcSignalRequest -> Empty
	OpProcKill   Op = "proc_kill"   // ProcKillRequest -> ProcInfo (Response.Proc)
)

// Ring sizes and limits of long-lived processes.
const (
	DefaultProcRing = 4 << 20  // ProcStartRequest.RingBytes when 0
	MinProcRing     = 64 << 10 // smaller requests get this
	MaxProcRing     = 64 << 20 // larger requests are refused
	DefaultProcLive = 32       // ProcStartRequest.MaxLive when 0
	// DefaultProcRead and MaxProcRead bound ProcOutputRequest.MaxBytes.
	DefaultProcRead = 1 << 20
	MaxProcRead     = 16 << 20
	// MaxProcInput caps ProcInputRequest.Data.
	MaxProcInput = 1 << 20
)

// Streams a ProcChunk comes from.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
	StreamPty    = "pty" // a terminal's one stream (stdout and stderr alike)
)

// Process states (ProcInfo.State).
const (
	ProcRunning = "running"
	ProcExited  = "exited" // ExitCode says how
	ProcKilled  = "killed" // by Signal (OOMKilled when the cgroup's OOM killer did it)
	// ProcStopped is a process the sandbox's hibernation stopped
	// (Hibernated is set; hibernate.go): it was running when the sandbox
	// went to sleep, and has neither an exit code nor a signal of its own.
	ProcStopped = "stopped"
)

// ProcStartRequest starts a process the daemon keeps: Argv as given (a
// shell command is the caller's `sh -c`), in Dir, with the sandbox's
// environment (set_env, the egress proxy's variables) under Env. It runs in
// a session and process group of its own. Without Pty its stdin is a pipe
// kept open for proc_input; with Pty it gets a terminal of that size as its
// controlling terminal and stdin, stdout and stderr (and TERM defaults to
// xterm-256color). RingBytes sizes its output ring (0: DefaultProcRing;
// at least MinProcRing, at most MaxProcRing). MaxLive is the caller's limit
// on processes running at once in the sandbox (0: DefaultProcLive): a start
// beyond it is refused with CodeResourceExhausted naming the limit and the
// running ids. User runs it as an account of the sandbox, as
// ExecRequest.User does (a terminal's device then belongs to the account
// too, as after a login).
type ProcStartRequest struct {
	Argv      []string          `json:"argv"`
	Dir       string            `json:"dir,omitempty"`
	User      string            `json:"user,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	Pty       *PtySize          `json:"pty,omitempty"`
	RingBytes int64             `json:"ring_bytes,omitempty"`
	MaxLive   int               `json:"max_live,omitempty"`
}

// PtySize is a terminal's size in character cells (each 1 to 10000).
type PtySize struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// ProcInfo describes a long-lived process. A process is running until its
// leader has exited and its output is closed: at its pipes' end, or 2 s
// after the leader's exit while processes it left still hold them (the
// pipes are then closed, so the output is final once the state is not
// running). ExitCode is set only for a process that exited by itself;
// one killed by a signal has Signal ("KILL", "TERM", ...) and no code,
// and OOMKilled when the sandbox's cgroup counted an OOM kill during its
// life (see the daemon's documentation: best effort). No field is ever
// made up: an unknown status leaves both empty.
type ProcInfo struct {
	ID        string            `json:"id"`
	PID       int               `json:"pid"`
	Argv      []string          `json:"argv"`
	Dir       string            `json:"dir,omitempty"`  // the directory it started in; "": the agent's
	User      string            `json:"user,omitempty"` // the account it runs as, by name; "": the agent's own
	Labels    map[string]string `json:"labels,omitempty"`
	Pty       *PtySize          `json:"pty,omitempty"` // the terminal's current size; nil without one
	State     string            `json:"state"`
	StartedAt time.Time         `json:"started_at"`
	ExitedAt  time.Time         `json:"exited_at,omitzero"`
	ExitCode  *int              `json:"exit_code,omitempty"`
	Signal    string            `json:"signal,omitempty"`
	OOMKilled bool              `json:"oom_killed,omitempty"`
	// Hibernated marks a process stopped by the sandbox's hibernation
	// (State ProcStopped; ExitedAt is when the sandbox went to sleep).
	// The daemon that reports it is a later one, started when the sandbox
	// woke: the process cannot be signalled, resized or written to, and
	// its output is what the agent kept of it (hibernate.go).
	Hibernated bool `json:"hibernated,omitempty"`
	// Output is the offset after the last byte written so far (the total
	// written); RingStart the first offset the ring still holds.
	Output    int64 `json:"output"`
	RingStart int64 `json:"ring_start"`
	RingBytes int64 `json:"ring_bytes"` // the ring's size
}

// ProcGetRequest describes one process; with Wait it first waits up to Wait
// (at most 24 h) for the process to end, and returns it running if it has
// not.
type ProcGetRequest struct {
	ID   string        `json:"id"`
	Wait time.Duration `json:"wait,omitempty"`
}

// ProcListRequest lists the processes, running and recently ended (the
// daemon forgets ended ones after an hour, or beyond the 64 newest),
// optionally only those whose labels include all of Labels.
type ProcListRequest struct {
	Labels map[string]string `json:"labels,omitempty"`
}

// ProcListResponse lists processes, oldest first.
type ProcListResponse struct {
	Processes []ProcInfo `json:"processes"`
}

// ProcOutputRequest reads a process's output from offset Since, at most
// MaxBytes of it (0: DefaultProcRead; at most MaxProcRead). A Since past the
// output's end is refused with CodeInvalidArgument.
type ProcOutputRequest struct {
	ID       string `json:"id"`
	Since    int64  `json:"since"`
	MaxBytes int    `json:"max_bytes,omitempty"`
}

// ProcOutputResponse is the output from the request's Since: Dropped bytes
// were lost from the ring before the first chunk (the reader was too slow),
// then Chunks in order, without a gap between them; Next is the cursor to
// resume from. The process's state is read after the output, so when it is
// not running, Next equal to Process.Output means everything was read.
type ProcOutputResponse struct {
	Chunks  []ProcChunk `json:"chunks"`
	Next    int64       `json:"next"`
	Dropped int64       `json:"dropped,omitempty"`
	Process ProcInfo    `json:"process"`
}

// ProcChunk is a piece of output: Data written to Stream, starting at Offset.
type ProcChunk struct {
	Stream string `json:"stream"`
	Offset int64  `json:"offset"`
	Data   []byte `json:"data"`
}

// ProcFollowRequest follows a process's output from offset Since: the
// response (the process as it is) is followed on the stream by ProcFrame
// frames with the output as it comes, and one last frame with Exit set once
// the process has ended and every byte was sent; then the agent closes the
// stream. The client sends nothing after its request: closing the stream
// ends the follow (never the process). A follower costs the agent one frame
// of memory (at most 256 KiB of output): one that falls behind the ring
// loses the oldest bytes and gets a frame whose Dropped says how many. One
// that takes nothing for 2 minutes is ended; it resumes from its cursor.
type ProcFollowRequest struct {
	ID    string `json:"id"`
	Since int64  `json:"since"`
}

// ProcFrame is one frame of a follow: Dropped bytes lost just before the
// first chunk, Chunks, and Next, the cursor after them. The last frame has
// Exit set, the process's final state.
type ProcFrame struct {
	Chunks  []ProcChunk `json:"chunks,omitempty"`
	Dropped int64       `json:"dropped,omitempty"`
	Next    int64       `json:"next"`
	Exit    *ProcInfo   `json:"exit,omitempty"`
}

// ProcInputRequest writes Data (at most MaxProcInput) to a process's stdin
// pipe, or to its terminal as typed keys. A process that does not read it
// within 10 s fails the request (CodeDeadlineExceeded, saying how much was
// written). EOF then closes the stdin pipe (refused for a terminal: send
// "\x04", Ctrl-D, as a user would).
type ProcInputRequest struct {
	ID   string `json:"id"`
	Data []byte `json:"data,omitempty"`
	EOF  bool   `json:"eof,omitempty"`
}

// ProcResizeRequest sets a terminal's size; the process gets SIGWINCH.
type ProcResizeRequest struct {
	ID   string `json:"id"`
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// ProcSignalRequest sends Signal ("TERM", "INT", "HUP", "KILL", ...) to the
// process's process group: its leader and every process it started that
// stayed in the group.
type ProcSignalRequest struct {
	ID     string `json:"id"`
	Signal string `json:"signal"`
}

// ProcKillRequest kills the process and its descendants with SIGKILL: its
// process group, its session, and every process below its leader, however
// it left the group (setsid, double fork) as long as it was found below a
// live member of the tree. It waits up to 5 s for the process to end and
// returns its state.
type ProcKillRequest struct {
	ID string `json:"id"`
}
