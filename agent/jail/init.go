package jail

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// jailPath is the program's PATH: only the system directories exist.
const jailPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// runInit is PID 1 of the jail's namespaces: it builds the root, drops
// what the program must not have, starts it, forwards signals to it and
// reaps; when the program ends it kills whatever the program left and
// tells the outer process how the program ended.
func runInit(s *Spec) int {
	// Capability and no_new_privs changes are per thread, and the program
	// is forked from this one.
	runtime.LockOSThread()
	statusFd := 3 + s.Fds
	syscall.CloseOnExec(statusFd)
	status := os.NewFile(uintptr(statusFd), "status")
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, Prefix+err.Error())
		fmt.Fprintf(status, "exit %d\n", 126)
		return 126
	}
	if err := buildRoot(s); err != nil {
		return fail(err)
	}
	if err := unix.Sethostname([]byte(hostname)); err != nil {
		return fail(fmt.Errorf("cannot set the jail's hostname: %w", err))
	}
	if !s.Network {
		if err := loopbackUp(); err != nil {
			return fail(err)
		}
	}
	prog, err := lookPath(s.Argv[0])
	if err != nil {
		return fail(err)
	}
	if err := setRlimits(s); err != nil {
		return fail(err)
	}
	if err := dropPrivileges(); err != nil {
		return fail(err)
	}
	env := []string{"PATH=" + jailPath, "HOME=" + s.Scratch, "TMPDIR=" + s.Scratch + "/.tmp", "LANG=C.UTF-8", "USER=kernel", "LOGNAME=kernel"}
	env = append(env, s.Env...)
	files := []uintptr{0, 1, 2}
	for fd := 3; fd < 3+s.Fds; fd++ {
		files = append(files, uintptr(fd))
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	pid, err := syscall.ForkExec(prog, s.Argv, &syscall.ProcAttr{
		Dir:   s.Scratch,
		Env:   env,
		Files: files,
		Sys: &syscall.SysProcAttr{
			Credential: &syscall.Credential{Uid: uint32(s.UID), Gid: uint32(s.GID), Groups: []uint32{}},
			Pdeathsig:  syscall.SIGKILL,
		},
	})
	if err != nil {
		return fail(fmt.Errorf("cannot start %s in the jail: %w", s.Argv[0], err))
	}
	// The passed descriptors are the program's now.
	for fd := 3; fd < 3+s.Fds; fd++ {
		syscall.Close(fd)
	}
	go func() {
		for sig := range sigs {
			_ = syscall.Kill(pid, sig.(syscall.Signal))
		}
	}()
	var end syscall.WaitStatus
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			break // ECHILD: nothing is left
		}
		if got == pid {
			end = ws
			// Whatever the program started goes with it.
			_ = syscall.Kill(-1, syscall.SIGKILL)
		}
	}
	if end.Signaled() {
		fmt.Fprintf(status, "signal %d\n", int(end.Signal()))
		return 128 + int(end.Signal())
	}
	fmt.Fprintf(status, "exit %d\n", end.ExitStatus())
	return end.ExitStatus()
}

// lookPath finds the program inside the jail.
func lookPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		if _, err := os.Stat(name); err != nil {
			return "", fmt.Errorf("the program %s is not inside the jail, which shows only the system directories (/usr, /bin, /lib...); install it there or configure a read-only path for it", name)
		}
		return name, nil
	}
	for _, dir := range filepath.SplitList(jailPath) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("the program %s is not on the jail's PATH (%s); install it under /usr or give its full path", name, jailPath)
}

// loopbackUp brings up the jail's only network interface.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("cannot open a socket to bring up the jail's loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("cannot read the jail's loopback: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("cannot bring up the jail's loopback: %w", err)
	}
	return nil
}

// setRlimits caps what cgroups do not, and backs them up: processes of
// the uid, file size, core dumps, and (with no memory cgroup) the address
// space.
func setRlimits(s *Spec) error {
	set := func(res int, n uint64) error {
		var cur unix.Rlimit
		if err := unix.Getrlimit(res, &cur); err == nil && cur.Max < n {
			n = cur.Max
		}
		return unix.Setrlimit(res, &unix.Rlimit{Cur: n, Max: n})
	}
	if err := set(unix.RLIMIT_CORE, 0); err != nil {
		return fmt.Errorf("cannot set the jail's limits: %w", err)
	}
	if s.Pids > 0 {
		if err := set(unix.RLIMIT_NPROC, uint64(s.Pids)); err != nil {
			return fmt.Errorf("cannot set the jail's process limit: %w", err)
		}
	}
	if s.FileBytes > 0 {
		if err := set(unix.RLIMIT_FSIZE, uint64(s.FileBytes)); err != nil {
			return fmt.Errorf("cannot set the jail's file size limit: %w", err)
		}
	}
	if s.memoryRlimit && s.MemoryBytes > 0 {
		if err := set(unix.RLIMIT_AS, uint64(s.MemoryBytes)); err != nil {
			return fmt.Errorf("cannot set the jail's memory limit: %w", err)
		}
	}
	return nil
}

// dropPrivileges empties the capability bounding set and sets
// no_new_privs, so the program (which starts as a non-root uid with no
// capabilities) can never gain any, not even through a setuid file.
func dropPrivileges() error {
	for c := 0; c < 64; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("cannot drop capability %d from the jail: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("cannot set no_new_privs: %w", err)
	}
	return nil
}
