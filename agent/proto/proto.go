// Package proto is the wire protocol between sandboxd and the sandbox-agent.
//
// sandboxd execs `sandbox-agent attach` once per sandbox; attach bridges the
// exec's stdio to the agent daemon's unix socket. Over that byte stream runs
// one yamux session in which sandboxd is the client: it opens one stream per
// request. A stream begins with one request frame from sandboxd and one
// response frame from the agent. A frame is a 4-byte big-endian length and a
// JSON document (at most MaxFrame bytes). For the streaming ops (OpAttach,
// OpDial) the stream carries raw bytes after the response frame; after
// OpWatch's it carries frames both ways: WatchEvent from the agent,
// WatchControl from sandboxd; after OpProcFollow's, ProcFrame frames from
// the agent (procs.go). With Request.Raw (when the daemon
// advertises HelloResponse.RawData) file data travels as raw frames
// after the JSON frame instead of base64 inside it (raw.go).
//
// File paths in requests are confined by the agent to Root: a path that is
// relative is taken from Root, an absolute one must lie inside it, and a
// path that escapes Root — "..", an absolute path elsewhere, or a symlink
// that resolves outside — is refused with CodeInvalidArgument. The agent is
// the only place this is decided, because only it sees the sandbox's
// filesystem and its symlinks.
package proto

import "time"

// Version is bumped on every incompatible change; attach refuses a daemon
// of another version and restarts it only when it owns no processes.
const Version = 1

// MaxFrame caps one JSON frame (64 MiB covers file batches).
const MaxFrame = 64 << 20

// Op names a request.
type Op string

const (
	OpHello      Op = "hello"       // -> HelloResponse
	OpReadFile   Op = "read_file"   // ReadFileRequest -> ReadFileResponse
	OpReadFiles  Op = "read_files"  // ReadFilesRequest -> ReadFilesResponse
	OpWriteFiles Op = "write_files" // WriteFilesRequest -> Empty (all or nothing)
	OpStat       Op = "stat"        // StatRequest -> StatResponse
	OpWalk       Op = "walk"        // WalkRequest -> WalkResponse
	OpExec       Op = "exec"        // ExecRequest -> ExecResponse (run to completion)
	OpSpawn      Op = "spawn"       // SpawnRequest -> SpawnResponse
	OpAttach     Op = "attach"      // AttachRequest -> Empty, then raw bytes
	OpSignal     Op = "signal"      // SignalRequest -> Empty
	OpWait       Op = "wait"        // WaitRequest -> ProcessInfo
	OpList       Op = "list"        // ListRequest -> ListResponse
	OpDial       Op = "dial"        // DialRequest -> Empty, then raw bytes
	OpClaim      Op = "claim"       // ClaimRequest -> Empty
	OpWatch      Op = "watch"       // WatchRequest -> WatchResponse, then WatchEvent frames (WatchControl frames back)
	OpSetEnv     Op = "set_env"     // SetEnvRequest -> Empty
	OpEgress     Op = "egress"      // EgressRequest -> EgressResponse; then the agent opens Incoming streams
)

// Request is the first frame of every stream. Exactly one of the pointer
// fields matching Op is set.
type Request struct {
	Op Op `json:"op"`
	// Raw moves file data out of JSON into raw frames (raw.go), for a
	// daemon that advertises HelloResponse.RawData: a write_files request
	// frame is followed by one raw frame per file, in order (empty for a
	// delete), and the response to a read_file (one frame) or read_files
	// (one per file, empty when skipped) is, unless it is an error. Each
	// message's raw frames end with a RawEnd frame, and its JSON leaves
	// the data fields empty. Other ops ignore it.
	Raw bool `json:"raw,omitempty"`
	// Again keeps the stream for another request after this one's response,
	// for the ops Reusable names, with a daemon that advertises
	// HelloResponse.StreamReuse: the client sends its next request on it
	// instead of opening a stream, so a call crosses the pipe as two
	// messages (request, response) rather than four (with the open's accept
	// and both closes riding separately). Either side closing the stream
	// ends it; a client reuses only streams idle for less than
	// ReuseIdle, and the daemon waits twice that for the next request.
	Again      bool               `json:"again,omitempty"`
	ReadFile   *ReadFileRequest   `json:"read_file,omitempty"`
	ReadFiles  *ReadFilesRequest  `json:"read_files,omitempty"`
	WriteFiles *WriteFilesRequest `json:"write_files,omitempty"`
	Stat       *StatRequest       `json:"stat,omitempty"`
	Walk       *WalkRequest       `json:"walk,omitempty"`
	Exec       *ExecRequest       `json:"exec,omitempty"`
	Spawn      *SpawnRequest      `json:"spawn,omitempty"`
	Attach     *AttachRequest     `json:"attach,omitempty"`
	Signal     *SignalRequest     `json:"signal,omitempty"`
	Wait       *WaitRequest       `json:"wait,omitempty"`
	List       *ListRequest       `json:"list,omitempty"`
	Dial       *DialRequest       `json:"dial,omitempty"`
	Claim      *ClaimRequest      `json:"claim,omitempty"`
	Watch      *WatchRequest      `json:"watch,omitempty"`
	SetEnv     *SetEnvRequest     `json:"set_env,omitempty"`
	Egress     *EgressRequest     `json:"egress,omitempty"`
	Xattrs     *XattrsRequest     `json:"xattrs,omitempty"` // OpXattrs (xattrs.go)

	// The long-lived processes' ops (procs.go).
	ProcStart  *ProcStartRequest  `json:"proc_start,omitempty"`
	ProcGet    *ProcGetRequest    `json:"proc_get,omitempty"`
	ProcList   *ProcListRequest   `json:"proc_list,omitempty"`
	ProcOutput *ProcOutputRequest `json:"proc_output,omitempty"`
	ProcFollow *ProcFollowRequest `json:"proc_follow,omitempty"`
	ProcInput  *ProcInputRequest  `json:"proc_input,omitempty"`
	ProcResize *ProcResizeRequest `json:"proc_resize,omitempty"`
	ProcSignal *ProcSignalRequest `json:"proc_signal,omitempty"`
	ProcKill   *ProcKillRequest   `json:"proc_kill,omitempty"`
}

// Response is the first frame the agent writes back. Error is set when the
// op failed; otherwise the field matching the op is set (none for Empty ops).
type Response struct {
	// Kept says the daemon waits on this stream for the client's next
	// request (Request.Again honoured); a client reuses a stream only
	// after a response that says so, so a stream the daemon closes after
	// a refusal is never taken again.
	Kept      bool               `json:"kept,omitempty"`
	Error     *Error             `json:"error,omitempty"`
	Hello     *HelloResponse     `json:"hello,omitempty"`
	ReadFile  *ReadFileResponse  `json:"read_file,omitempty"`
	ReadFiles *ReadFilesResponse `json:"read_files,omitempty"`
	Stat      *StatResponse      `json:"stat,omitempty"`
	Walk      *WalkResponse      `json:"walk,omitempty"`
	Exec      *ExecResponse      `json:"exec,omitempty"`
	Spawn     *SpawnResponse     `json:"spawn,omitempty"`
	Process   *ProcessInfo       `json:"process,omitempty"`
	List      *ListResponse      `json:"list,omitempty"`
	Watch     *WatchResponse     `json:"watch,omitempty"`
	Egress    *EgressResponse    `json:"egress,omitempty"`
	// Proc answers proc_start, proc_get, proc_follow and proc_kill.
	Proc       *ProcInfo           `json:"proc,omitempty"`
	ProcList   *ProcListResponse   `json:"proc_list,omitempty"`
	ProcOutput *ProcOutputResponse `json:"proc_output,omitempty"`
	Ports      *PortsResponse      `json:"ports,omitempty"`    // OpPorts (ports.go)
	Activity   *Activity           `json:"activity,omitempty"` // OpActivity (activity.go)
	Xattrs     *XattrsResponse     `json:"xattrs,omitempty"`   // OpXattrs (xattrs.go)
	// Output is set, alone, on the frames a streamed exec writes before
	// its response (ExecRequest.Stream).
	Output *ExecOutput `json:"output,omitempty"`
}

// Error codes are errdefs class codes ("invalid_argument", "not_found", ...).
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// HelloResponse identifies the daemon.
type HelloResponse struct {
	Version   int       `json:"version"`
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
	Hostname  string    `json:"hostname"`
	// FDHandoff says the daemon takes an attach's stdin and stdout as
	// descriptors (HandoffByte plus SCM_RIGHTS as the first message on its
	// socket) and serves the session on them directly, so no process copies
	// the bytes in between. Attach bridges by copying when it is false.
	FDHandoff bool `json:"fd_handoff,omitempty"`
	// Fencing says the daemon takes OpClaim. An older daemon rejects it
	// as an unknown op; the client refuses to claim one without asking.
	Fencing bool `json:"fencing,omitempty"`
	// Watch says the daemon takes OpWatch; with an older one sandboxd
	// relies on the mtime checks it makes at each call.
	Watch bool `json:"watch,omitempty"`
	// RawData says the daemon takes Request.Raw. An older daemon would
	// ignore the field and respond in JSON, so the client sets it only
	// when this is set.
	RawData bool `json:"raw_data,omitempty"`
	// SandboxEnv says the daemon takes OpSetEnv. An older daemon rejects
	// it as an unknown op; the client refuses to send it without asking.
	SandboxEnv bool `json:"sandbox_env,omitempty"`
	// StreamReuse says the daemon honours Request.Again.
	StreamReuse bool `json:"stream_reuse,omitempty"`
	// Egress says the daemon takes OpEgress. An older daemon rejects it
	// as an unknown op; a sandbox in network mode "proxy" needs it.
	Egress bool `json:"egress,omitempty"`
	// Processes says the daemon takes the proc_ ops (procs.go). An older
	// daemon rejects them as unknown ops; the client refuses to send them
	// without asking.
	Processes bool `json:"processes,omitempty"`
	// Ports says the daemon takes OpPorts (ports.go).
	Ports bool `json:"ports,omitempty"`
	// Activity says the daemon takes OpActivity (activity.go).
	Activity bool `json:"activity,omitempty"`
	// Accounts says the daemon honours ExecRequest.User,
	// ProcStartRequest.User and WriteFilesRequest.Owner. An older daemon
	// would ignore them and run the command, or write the files, as its own
	// user (root); the client refuses to send them without asking.
	Accounts bool `json:"accounts,omitempty"`
	// Xattrs says the daemon takes WriteFile.Xattrs and OpXattrs
	// (xattrs.go); an older one would drop the attributes unsaid.
	Xattrs bool `json:"xattrs,omitempty"`
}

// ReuseIdle is how long a client keeps an idle reusable stream; the daemon
// waits twice as long for its next request, so a stream the client takes
// is never one the daemon is closing.
const ReuseIdle = time.Minute

// Reusable reports whether op's stream may carry another request after
// its response (Request.Again): the file ops, whose whole exchange is their
// request and response frames. Ops that watch their stream for the client
// going away (exec, wait) or carry bytes after the response never are.
func Reusable(op Op) bool {
	switch op {
	case OpReadFile, OpReadFiles, OpWriteFiles, OpStat, OpWalk, OpXattrs:
		return true
	}
	return false
}

// HandoffByte opens a connection that hands over descriptors; a yamux
// session always starts with its version byte 0, so the two never clash.
const HandoffByte = 'H'

// ReadFileRequest reads one file. MaxBytes caps the returned data (0: 16 MiB);
// a longer file is truncated and Size tells its full length.
type ReadFileRequest struct {
	Root     string `json:"root"`
	Path     string `json:"path"`
	MaxBytes int64  `json:"max_bytes,omitempty"`
}

// ReadFileResponse carries the (possibly truncated) contents.
type ReadFileResponse struct {
	Path      string    `json:"path"` // resolved absolute path
	Data      []byte    `json:"data"`
	Size      int64     `json:"size"`
	Mode      uint32    `json:"mode"`
	ModTime   time.Time `json:"mod_time"`
	Truncated bool      `json:"truncated,omitempty"`
}

// ReadFilesRequest reads many files in one round trip (for search tools).
// Files larger than MaxBytesEach are skipped with Skipped set; the total
// response is capped at MaxTotal (0: 48 MiB) and the rest reported as Missing.
type ReadFilesRequest struct {
	Root         string   `json:"root"`
	Paths        []string `json:"paths"`
	MaxBytesEach int64    `json:"max_bytes_each,omitempty"`
	MaxTotal     int64    `json:"max_total,omitempty"`
}

// ReadFilesResponse has one entry per requested path, in order.
type ReadFilesResponse struct {
	Files []FileData `json:"files"`
}

// FileData is one file of a batch read.
type FileData struct {
	Path    string    `json:"path"`
	Data    []byte    `json:"data,omitempty"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mod_time"`
	Skipped string    `json:"skipped,omitempty"` // why the data is absent ("too large", "not found", "over total cap", ...)
}

// WriteFilesRequest writes, creates or deletes several files all or nothing:
// every new content is staged to a temporary file beside its target first,
// then all are renamed into place; if any step fails, what was already
// renamed is restored from its backup, so the tree is never left half-written.
// ExpectSHA256, when set for a file, must match the current contents (the
// empty string for "must not exist" is spelled ExpectAbsent).
//
// Owner, for a daemon that says HelloResponse.Accounts, is the name (or
// numeric uid) of an account of the sandbox's /etc/passwd: every file the
// batch creates, and every directory MkdirAll makes for it, belongs to the
// account's uid and primary gid, from before it gets its name; a file that
// existed and is replaced keeps the owner it had. An account the sandbox
// does not have is refused with CodeNotFound and nothing is written. ""
// leaves every new file and directory, and every replaced file, to the
// agent's own user (root).
type WriteFilesRequest struct {
	Root  string      `json:"root"`
	Files []WriteFile `json:"files"`
	Owner string      `json:"owner,omitempty"`
}

// WriteFile is one entry of a WriteFilesRequest.
type WriteFile struct {
	Path         string `json:"path"`
	Data         []byte `json:"data,omitempty"`
	Mode         uint32 `json:"mode,omitempty"` // 0: keep the existing mode, or 0644 for a new file
	Delete       bool   `json:"delete,omitempty"`
	MkdirAll     bool   `json:"mkdir_all,omitempty"` // create missing parent directories
	ExpectSHA256 string `json:"expect_sha256,omitempty"`
	ExpectAbsent bool   `json:"expect_absent,omitempty"`
	// Xattrs, for a daemon that says HelloResponse.Xattrs, are set as
	// extended attributes of the new content, before it takes the file's
	// name: the file has exactly these afterwards (a replaced file's
	// own attributes are not carried over). Names begin with "user."; at
	// most MaxXattrsPerFile of them, each value at most MaxXattrValue
	// bytes. A file system that keeps no extended attributes fails the
	// batch with CodeFailedPrecondition. Not allowed with Delete.
	Xattrs map[string]string `json:"xattrs,omitempty"`
}

// StatRequest stats a path (following symlinks that stay inside Root).
type StatRequest struct {
	Root string `json:"root"`
	Path string `json:"path"`
}

// StatResponse describes one file.
type StatResponse struct {
	FileInfo
}

// FileInfo describes one file or directory; Path is relative to the walk's
// base for walks and absolute for stat.
type FileInfo struct {
	Path    string    `json:"path"`
	Size    int64     `json:"size"`
	Mode    uint32    `json:"mode"` // Go fs.FileMode bits
	ModTime time.Time `json:"mod_time"`
	IsDir   bool      `json:"is_dir,omitempty"`
	Symlink bool      `json:"symlink,omitempty"`
}

// WalkRequest lists the regular files under Path (inside Root). Hidden
// directories named in SkipDirs (default: .git, node_modules) are not
// entered; with Gitignore the .gitignore files met on the way are honoured.
// At most MaxEntries (0: 200000) entries are returned; Truncated says more exist.
// With ReportSkipped the response names the directories not entered and why.
type WalkRequest struct {
	Root          string   `json:"root"`
	Path          string   `json:"path"`
	MaxEntries    int      `json:"max_entries,omitempty"`
	Gitignore     bool     `json:"gitignore,omitempty"`
	SkipDirs      []string `json:"skip_dirs,omitempty"`
	MaxSize       int64    `json:"max_size,omitempty"` // files larger than this are left out (0: no limit)
	ReportSkipped bool     `json:"report_skipped,omitempty"`
}

// WalkResponse lists files, paths relative to the walked directory.
type WalkResponse struct {
	Base      string     `json:"base"` // absolute path that was walked
	Files     []FileInfo `json:"files"`
	Truncated bool       `json:"truncated,omitempty"`
	// Skipped names the directories the walk did not enter (with
	// ReportSkipped; at most MaxSkippedReported, SkippedMore counts the rest).
	Skipped     []SkippedDir `json:"skipped,omitempty"`
	SkippedMore int          `json:"skipped_more,omitempty"`
}

// MaxSkippedReported bounds WalkResponse.Skipped.
const MaxSkippedReported = 100

// SkippedDir is a directory a walk did not enter.
type SkippedDir struct {
	Dir    string `json:"dir"`    // relative to the walked directory
	Reason string `json:"reason"` // SkipReason*
}

// Why a walk did not enter a directory.
const (
	SkipReasonList       = "skip list"             // named in SkipDirs (or the default list)
	SkipReasonGitignore  = ".gitignore"            // a .gitignore rule excludes it
	SkipReasonSymlink    = "symlink, not followed" // a symbolic link to a directory
	SkipReasonUnreadable = "unreadable"            // it could not be opened
)

// ExecRequest runs a command to completion and returns its capped output.
// The command runs in its own process group. A sandbox's agent supervises
// every process the command starts, however it detaches (background jobs,
// setsid, daemons): all of them are killed at the timeout or when the
// request's stream closes, and those still running when the command exits
// are killed at the timeout. An agent that does not supervise kills the
// command's process group only.
//
// User, for a daemon that says HelloResponse.Accounts, is the name (or
// numeric uid) of an account of the sandbox's /etc/passwd the command runs
// as: its uid, primary gid and supplementary groups, with HOME, USER and
// LOGNAME set to the account's unless Env gives them, and, without Dir, in
// the account's home directory ("/" when that does not exist). An account
// the sandbox does not have is refused with CodeNotFound. "" runs it as
// the agent's own user (root) in the agent's directory.
type ExecRequest struct {
	Argv     []string          `json:"argv"`
	Dir      string            `json:"dir,omitempty"`
	User     string            `json:"user,omitempty"`
	Env      map[string]string `json:"env,omitempty"` // added to the agent's environment
	Stdin    []byte            `json:"stdin,omitempty"`
	Timeout  time.Duration     `json:"timeout,omitempty"`   // 0: 10 minutes
	MaxBytes int               `json:"max_bytes,omitempty"` // per stream, head and tail kept (0: 64 KiB)
	// Stream asks for the output while the command runs: before the
	// response the agent writes frames whose Response has only Output set,
	// with the first MaxBytes of each stream as it is written. The
	// response keeps its head and tail as without Stream. An agent that
	// predates Stream ignores it and writes the response alone.
	Stream bool `json:"stream,omitempty"`
}

// ExecOutput is one piece of a streamed exec's output (ExecRequest.Stream).
type ExecOutput struct {
	Stream string `json:"stream"` // "stdout" or "stderr"
	Data   []byte `json:"data,omitempty"`
	// Dropped counts bytes left out just before Data because the reader
	// was too slow; the response still has them if they are in its head or tail.
	Dropped int64 `json:"dropped,omitempty"`
	// Capped says this stream reached MaxBytes: no more of it is streamed.
	Capped bool `json:"capped,omitempty"`
}

// ExecResponse is the result of an ExecRequest. Each stream keeps its head
// and tail; Omitted counts the bytes cut from its middle.
type ExecResponse struct {
	ExitCode      int           `json:"exit_code"`
	Signal        string        `json:"signal,omitempty"`
	TimedOut      bool          `json:"timed_out,omitempty"`
	Stdout        []byte        `json:"stdout"`
	Stderr        []byte        `json:"stderr"`
	StdoutOmitted int64         `json:"stdout_omitted,omitempty"`
	StderrOmitted int64         `json:"stderr_omitted,omitempty"`
	Duration      time.Duration `json:"duration"`

	// Killed counts the processes killed at the timeout, when the stream
	// closed, or for the sandbox's pid reserve, the command's own included.
	Killed int `json:"killed,omitempty"`
	// OutOfPids says the command's processes were killed because the
	// sandbox was running out of processes: PidsInUse of PidsLimit were in
	// use, and the agent keeps PidsReserve free for itself.
	OutOfPids   bool  `json:"out_of_pids,omitempty"`
	PidsInUse   int64 `json:"pids_in_use,omitempty"`
	PidsLimit   int64 `json:"pids_limit,omitempty"`
	PidsReserve int64 `json:"pids_reserve,omitempty"`
	// Left counts the processes the command left running when it exited
	// (background jobs, daemons); LeftPIDs names up to 16 of them. They are
	// killed at LeftUntil, the request's timeout after it began.
	Left      int       `json:"left,omitempty"`
	LeftPIDs  []int     `json:"left_pids,omitempty"`
	LeftUntil time.Time `json:"left_until,omitzero"`
}

// SpawnRequest starts a long-lived process owned by the daemon. Its output is
// kept in a bounded buffer until someone attaches; when the buffer is full
// the agent stops reading (the process blocks) rather than dropping bytes.
// Name is a caller-chosen key (e.g. "lsp/go/workspace"); spawning a Name that
// is still running fails with CodeConflict so callers re-attach instead.
type SpawnRequest struct {
	Name string `json:"name,omitempty"`
	// Argv is the program and its arguments; an Argv[0] of AgentSelf runs
	// the agent's own executable (whatever its path in this sandbox).
	Argv   []string          `json:"argv"`
	Dir    string            `json:"dir,omitempty"`
	Env    map[string]string `json:"env,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	// Stdin keeps a pipe to the process's stdin for attachers; otherwise stdin is /dev/null.
	Stdin bool `json:"stdin,omitempty"`
	// ExtraFiles opens N more pipe pairs as fds 3.. (the child reads fd 3+2i, writes fd 4+2i),
	// attachable as streams "fd3", "fd4", ...; used by kernels to keep their protocol off stdout.
	ExtraPipes int `json:"extra_pipes,omitempty"`
}

// AgentSelf as SpawnRequest.Argv[0] names the agent's own executable: how
// sandboxd starts the agent's helper commands (such as `relay`) in a
// sandbox whose image has nothing else it could rely on.
const AgentSelf = "sandbox-agent:self"

// SpawnResponse names the new process.
type SpawnResponse struct {
	Process ProcessInfo `json:"process"`
}

// AttachRequest connects the stream to a process's stdio: Stream is "stdin",
// "stdout", "stderr", or "fdN" for an extra pipe. One attacher per stream at
// a time: a new attach replaces the old one (whose stream is closed), which
// is how a restarted sandboxd takes over.
type AttachRequest struct {
	ID     string `json:"id"`
	Stream string `json:"stream"`
}

// SignalRequest sends a signal ("TERM", "KILL", "INT", ...) to a process,
// to its whole process group when Group is set.
type SignalRequest struct {
	ID     string `json:"id"`
	Signal string `json:"signal"`
	Group  bool   `json:"group,omitempty"`
}

// WaitRequest waits for a process to exit, at most Timeout (0: return at once).
// The response's ProcessInfo has Running set when it has not exited yet.
type WaitRequest struct {
	ID      string        `json:"id"`
	Timeout time.Duration `json:"timeout,omitempty"`
}

// ListRequest lists the daemon's processes, optionally only those whose
// labels include all of Labels.
type ListRequest struct {
	Labels map[string]string `json:"labels,omitempty"`
}

// ListResponse lists processes, oldest first.
type ListResponse struct {
	Processes []ProcessInfo `json:"processes"`
}

// ProcessInfo describes a spawned process. Exited processes stay listed
// (and waitable) until they are older than the daemon's retention.
type ProcessInfo struct {
	ID        string            `json:"id"`
	Name      string            `json:"name,omitempty"`
	PID       int               `json:"pid"`
	Argv      []string          `json:"argv"`
	Labels    map[string]string `json:"labels,omitempty"`
	StartedAt time.Time         `json:"started_at"`
	Running   bool              `json:"running"`
	ExitCode  int               `json:"exit_code"`
	Signal    string            `json:"signal,omitempty"`
	ExitedAt  time.Time         `json:"exited_at,omitzero"`
	// Hibernated marks a process the sandbox's hibernation stopped, as the
	// daemon started at the wake reports it (hibernate.go): Running is
	// false, ExitedAt is when the sandbox went to sleep, and ExitCode (0)
	// and Signal ("") mean nothing. It cannot be attached to or signalled.
	Hibernated bool `json:"hibernated,omitempty"`
}

// DialRequest connects the stream to a socket inside the sandbox.
// Network is "unix" (or "tcp" to a loopback address).
type DialRequest struct {
	Network string        `json:"network"`
	Address string        `json:"address"`
	Timeout time.Duration `json:"timeout,omitempty"`
}

// ClaimRequest makes the session the sandbox's owner at Epoch, a fencing
// epoch that only grows (sandboxd's replicas use their conversation Lease's
// leaseTransitions). The daemon keeps the highest epoch claimed, in its
// state dir when it has one, so that a restarted daemon remembers it. A
// claim below it, or at it by another Holder, is refused with
// CodeFailedPrecondition; an accepted claim closes every other session that
// claimed a lower epoch, after their running requests ended. A session that
// never claims is not fenced (backends with one sandboxd never claim).
type ClaimRequest struct {
	Holder string `json:"holder"`
	Epoch  int64  `json:"epoch"`
}

// SetEnvRequest sets the sandbox's environment: every exec and spawn the
// daemon starts afterwards gets Env over the daemon's own environment (the
// image's and the engine's), and the request's own Env over both. It is how
// a pool sandbox, made generic, takes the environment of the request that
// claims it. The sandbox's environment is set once, by the claim: the
// daemon refuses with CodeFailedPrecondition a SetEnv once it has started
// a command (exec or spawn), or once an earlier SetEnv recorded other
// values; the same values again succeed (a retried claim). The daemon
// keeps it in its state dir when it has one, so that a restarted daemon
// applies it still. Names must be non-empty, without '=' or NUL, and
// values without NUL.
type SetEnvRequest struct {
	Env map[string]string `json:"env"`
}

// WatchRequest watches the workspace Root for changes made by anything in
// the sandbox (commands, kernels, workers, the agent's own writes). The
// agent keeps one watch per resolved root, shared by every stream on it,
// and ends it when the last stream closes. It watches each directory
// (inotify) except .git, symlinked and gitignored ones, up to MaxDirs;
// past the cap (or the kernel's own limit) Limited is set and changes in
// the unwatched directories go unreported. Changes to gitignored files are
// not reported. Changes are coalesced over Window from the first one and
// deduplicated per path; once a burst (changes with no quiet Window
// between them) has touched more than MaxBatch paths, the rest of it is
// one event with Overflow set ("many files changed", sent when the burst
// quiets down or 2 s after the overflow began), which asks for a full
// resync. The response is sent once every directory is watched: every
// change after it is reported.
type WatchRequest struct {
	Root     string        `json:"root"`
	MaxDirs  int           `json:"max_dirs,omitempty"`  // 0: DefaultWatchMaxDirs
	Window   time.Duration `json:"window,omitempty"`    // 0: DefaultWatchWindow
	MaxBatch int           `json:"max_batch,omitempty"` // 0: DefaultWatchMaxBatch
}

// Watch defaults. The window is what one change waits before it is sent;
// short enough that a tool call right after a shell edit sees it, long
// enough that a save burst (write, chmod, rename) is one event.
const (
	DefaultWatchMaxDirs  = 8192
	DefaultWatchWindow   = 75 * time.Millisecond
	DefaultWatchMaxBatch = 2000
)

// WatchResponse says what is watched.
type WatchResponse struct {
	Base    string `json:"base"` // the resolved root
	Dirs    int    `json:"dirs"`
	Limited bool   `json:"limited,omitempty"`
}

// WatchControl is a frame sandboxd sends on a watch stream. Flush asks for
// every change made before it to be sent now: the agent responds with an
// event whose Flushed is this id, after the changes.
type WatchControl struct {
	Flush uint64 `json:"flush,omitempty"`
}

// WatchEvent is one coalesced batch. Seq rises by one per event of the
// watch (a gap means events were lost: treat it as Overflow). Flushed,
// when set, is the response to WatchControl.Flush.
type WatchEvent struct {
	Seq      uint64        `json:"seq"`
	Changes  []WatchChange `json:"changes,omitempty"`
	Overflow bool          `json:"overflow,omitempty"`
	Flushed  uint64        `json:"flushed,omitempty"`
	Dirs     int           `json:"dirs"`
	Limited  bool          `json:"limited,omitempty"`
}

// WatchChange is one changed path, absolute. Kind uses LSP's numbering.
type WatchChange struct {
	Path  string     `json:"path"`
	Kind  ChangeKind `json:"kind"`
	IsDir bool       `json:"is_dir,omitempty"`
}

// ChangeKind is what happened to a path (LSP's FileChangeType values).
type ChangeKind uint8

const (
	Created ChangeKind = 1
	Changed ChangeKind = 2
	Deleted ChangeKind = 3
)

// EgressRequest turns on the sandbox's egress proxy (network mode "proxy"):
// the daemon listens on a loopback port inside the sandbox, sets the proxy
// variables (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, their lower-case forms and
// NO_PROXY) and the CA bundle variables for every command it starts from
// then on, and carries each connection to the port to sandboxd on a stream
// it opens on the session that sent the request (the newest such session
// that is still open), the stream beginning with an Incoming frame
// (IncomingEgress). sandboxd alone decides what the connection may reach;
// the agent only carries bytes. The request may be sent again on every new
// session: the port and the variables stay the same, and the daemon keeps
// them in its state dir so that a restarted daemon listens at once.
type EgressRequest struct {
	// CACert is the PEM certificate of the authority whose certificates
	// sandboxd presents for the hosts it intercepts (to add credentials).
	// The daemon adds it to a bundle of the system's authorities that the
	// CA variables name, and to the system bundle where that is writable.
	CACert string `json:"ca_cert,omitempty"`
}

// EgressResponse says where the proxy listens and what the daemon set.
type EgressResponse struct {
	// Proxy is the proxy's URL inside the sandbox, "http://127.0.0.1:PORT".
	Proxy string `json:"proxy"`
	// CABundle is the path of the bundle the CA variables name; "" without
	// a CA.
	CABundle string `json:"ca_bundle,omitempty"`
	// SystemBundle says the CA was added to the system bundle as well.
	SystemBundle bool `json:"system_bundle,omitempty"`
	// Env is what every command started from now on gets.
	Env map[string]string `json:"env,omitempty"`
}

// IncomingEgress is the kind of a stream carrying one connection a program
// in the sandbox made to the egress proxy: raw bytes after the frame, in
// the HTTP proxy protocol.
const IncomingEgress = "egress"

// Incoming is the first frame of a stream the agent opens towards sandboxd
// (the one direction the client does not open). sandboxd closes a stream
// of a kind it does not serve.
type Incoming struct {
	Kind string `json:"kind"`
	// Peer is the address the program connected from (for the record).
	Peer string `json:"peer,omitempty"`
}
