package daemon

import (
	"strconv"
	"strings"
	"syscall"

	"github.com/sandboxd/sandboxd/errdefs"
)

var signalsByName = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT, "ABRT": syscall.SIGABRT,
	"KILL": syscall.SIGKILL, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "PIPE": syscall.SIGPIPE,
	"ALRM": syscall.SIGALRM, "TERM": syscall.SIGTERM, "CHLD": syscall.SIGCHLD, "CONT": syscall.SIGCONT,
	"STOP": syscall.SIGSTOP, "TSTP": syscall.SIGTSTP, "TTIN": syscall.SIGTTIN, "TTOU": syscall.SIGTTOU,
	"WINCH": syscall.SIGWINCH, "SEGV": syscall.SIGSEGV, "BUS": syscall.SIGBUS, "FPE": syscall.SIGFPE,
	"ILL": syscall.SIGILL, "TRAP": syscall.SIGTRAP, "SYS": syscall.SIGSYS, "XCPU": syscall.SIGXCPU,
	"XFSZ": syscall.SIGXFSZ, "VTALRM": syscall.SIGVTALRM, "PROF": syscall.SIGPROF, "IO": syscall.SIGIO,
	"URG": syscall.SIGURG, "PWR": syscall.SIGPWR,
}

// parseSignal accepts "TERM", "SIGTERM", "term" or a number.
func parseSignal(s string) (syscall.Signal, error) {
	name := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "SIG")
	if sig, ok := signalsByName[name]; ok {
		return sig, nil
	}
	if n, err := strconv.Atoi(name); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n), nil
	}
	return 0, errdefs.InvalidArgument("signal %q is not known; use a name such as TERM, KILL, INT or HUP", s)
}

// signalName is the short name of sig ("KILL"), or its number.
func signalName(sig syscall.Signal) string {
	for name, s := range signalsByName {
		if s == sig {
			return name
		}
	}
	return strconv.Itoa(int(sig))
}

// exitFields turns a wait status into an exit code and signal name; a
// signalled process reports 128+signal as its code, as shells do.
func exitFields(ws syscall.WaitStatus) (int, string) {
	if ws.Signaled() {
		return 128 + int(ws.Signal()), signalName(ws.Signal())
	}
	return ws.ExitStatus(), ""
}
