package jail

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Prefix starts every line the jail itself writes to stderr, so a caller
// can tell the jail's own words from the program's.
const Prefix = "sandbox-agent jail: "

// forwarded are the signals the jail passes on to its program: eval
// interrupts a cell with SIGINT, and a polite stop is SIGTERM.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// Main runs the jail subcommand and returns its exit status (or never
// returns, when it ends the way its program ended: by a signal).
func Main(args []string) int {
	s, init, err := Parse(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, Prefix+err.Error())
		return 2
	}
	if init {
		return runInit(s)
	}
	return runOuter(s)
}

// Check returns an error saying why jails cannot be made here (nil when
// they can): it asks for what a jail needs, without making one.
func Check() error {
	if os.Geteuid() != 0 {
		return errors.New("host kernels cannot be confined: the sandbox agent does not run as root, which making a jail's namespaces and mounts needs")
	}
	if !hasCapSysAdmin() {
		return errors.New("host kernels cannot be confined: the sandbox agent runs as root without CAP_SYS_ADMIN (an unprivileged container), which making a jail's namespaces and mounts needs")
	}
	return nil
}

// capSysAdmin is CAP_SYS_ADMIN's bit in /proc/self/status's CapEff.
const capSysAdmin = 21

func hasCapSysAdmin() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && n&(1<<capSysAdmin) != 0
		}
	}
	return false
}

// runOuter is the process the agent spawned. It stays in the host's
// namespaces: it makes the cgroup, starts the jail's init in new namespaces,
// forwards signals to it, and ends as the program ended.
func runOuter(s *Spec) int {
	if err := Check(); err != nil {
		fmt.Fprintln(os.Stderr, Prefix+err.Error())
		return 126
	}
	// Pdeathsig fires when the thread that started the child ends: keep this
	// goroutine on one thread for the jail's life.
	runtime.LockOSThread()
	if err := prepareScratch(s); err != nil {
		fmt.Fprintln(os.Stderr, Prefix+err.Error())
		return 126
	}
	cg, err := newCgroup(s)
	if err != nil {
		fmt.Fprintln(os.Stderr, Prefix+err.Error())
		return 126
	}
	defer cg.remove()

	statusR, statusW, err := os.Pipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, Prefix+"cannot make the status pipe: "+err.Error())
		return 126
	}
	args := []string{"jail", "--init"}
	if cg.none {
		// No cgroup holds the memory: init sets RLIMIT_AS instead.
		args = append(args, "--memory-rlimit")
	}
	args = append(args, s.Args()...)
	cmd := exec.Command("/proc/self/exe", args...)
	cmd.Args[0] = "sandbox-agent"
	cmd.Env = []string{}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	for fd := 3; fd < 3+s.Fds; fd++ {
		cmd.ExtraFiles = append(cmd.ExtraFiles, os.NewFile(uintptr(fd), "fd"+strconv.Itoa(fd)))
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, statusW)
	flags := syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS
	if !s.Network {
		flags |= syscall.CLONE_NEWNET
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: uintptr(flags), Pdeathsig: syscall.SIGKILL}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, Prefix+"cannot make the jail's namespaces: "+err.Error()+"; host kernels need root with CAP_SYS_ADMIN (a privileged host, not an unprivileged container)")
		return 126
	}
	// The program holds the passed descriptors now; dropping ours lets the
	// agent see their end when the program ends.
	statusW.Close()
	for _, f := range cmd.ExtraFiles[:s.Fds] {
		f.Close()
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var werr error
wait:
	for {
		select {
		case sig := <-sigs:
			_ = cmd.Process.Signal(sig)
		case werr = <-done:
			break wait
		}
	}
	signal.Stop(sigs)
	st := readStatus(statusR)
	statusR.Close()
	if cg.oomKilled() {
		fmt.Fprintf(os.Stderr, "%sthe program reached its memory limit of %d MiB and was killed\n", Prefix, s.MemoryBytes>>20)
	}
	cg.remove()
	return exitLike(st, werr)
}

// status is how the program ended, as init saw it.
type status struct {
	code   int
	signal syscall.Signal
	known  bool
}

// readStatus reads init's one line: "exit N" or "signal N" (nothing when
// init itself was killed).
func readStatus(r io.Reader) status {
	b, _ := io.ReadAll(io.LimitReader(r, 64))
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return status{}
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		return status{}
	}
	switch f[0] {
	case "exit":
		return status{code: n, known: true}
	case "signal":
		return status{signal: syscall.Signal(n), known: true}
	}
	return status{}
}

// exitLike ends this process the way the program ended, so the agent
// reports the program's own exit status or signal.
func exitLike(st status, werr error) int {
	if !st.known {
		// init died without a word: report its own end.
		var ee *exec.ExitError
		if errors.As(werr, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				st = status{signal: ws.Signal(), known: true}
			} else {
				return ee.ExitCode()
			}
		} else if werr != nil {
			return 126
		} else {
			return 0
		}
	}
	if st.signal == 0 {
		return st.code
	}
	signal.Reset(st.signal)
	_ = syscall.Kill(os.Getpid(), st.signal)
	// A signal whose default is to go on (or a stop) does not end us.
	time.Sleep(100 * time.Millisecond)
	return 128 + int(st.signal)
}

// prepareScratch makes the scratch directory (and its .tmp, the jail's
// /tmp) belong to the jail's uid, readable by nobody else. Each is opened
// without following a symlink and changed through its descriptor: a
// program of the same jail that swaps .tmp for a link gains nothing.
func prepareScratch(s *Spec) error {
	for _, d := range []string{s.Scratch, s.Scratch + "/.tmp"} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("cannot make the scratch directory %s: %v", d, err)
		}
		fd, err := syscall.Open(d, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("cannot use the scratch directory %s (%v); it must be a directory, not a link", d, err)
		}
		err = syscall.Fchown(fd, s.UID, s.GID)
		if err == nil {
			err = syscall.Fchmod(fd, 0o700)
		}
		syscall.Close(fd)
		if err != nil {
			return fmt.Errorf("cannot give the scratch directory %s to uid %d: %v", d, s.UID, err)
		}
	}
	return nil
}
