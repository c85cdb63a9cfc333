package daemon

import (
	"syscall"
	"time"
	"unsafe"
)

// Raw system calls for the paths that run while a fork bomb holds every pid
// (the kill loop, reaping, the supervisor's reports). syscall.RawSyscall
// does not tell the Go scheduler it is in a system call, so the runtime
// never hands the thread's P to another thread during one, and so never
// needs to clone a thread for that: a clone the pids limit refuses is fatal
// to a Go program. Each of these calls is short and never blocks for long.

// atFDCWD is AT_FDCWD (-100) as the kernel reads it.
const atFDCWD = ^uintptr(99)

func rawOpen(path string, flags int) (int, syscall.Errno) {
	p, err := syscall.BytePtrFromString(path)
	if err != nil {
		return -1, syscall.EINVAL
	}
	fd, _, errno := syscall.RawSyscall6(syscall.SYS_OPENAT, atFDCWD, uintptr(unsafe.Pointer(p)), uintptr(flags|syscall.O_CLOEXEC), 0, 0, 0)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), 0
}

func rawRead(fd int, b []byte) (int, syscall.Errno) {
	if len(b) == 0 {
		return 0, 0
	}
	n, _, errno := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	return int(n), errno
}

func rawWrite(fd int, b []byte) syscall.Errno {
	for len(b) > 0 {
		n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return errno
		}
		b = b[n:]
	}
	return 0
}

func rawClose(fd int) { syscall.RawSyscall(syscall.SYS_CLOSE, uintptr(fd), 0, 0) }

func rawGetdents(fd int, b []byte) (int, syscall.Errno) {
	n, _, errno := syscall.RawSyscall(syscall.SYS_GETDENTS64, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	return int(n), errno
}

func rawWait4(pid int, ws *syscall.WaitStatus, options int) (int, syscall.Errno) {
	r, _, errno := syscall.RawSyscall6(syscall.SYS_WAIT4, uintptr(pid), uintptr(unsafe.Pointer(ws)), uintptr(options), 0, 0, 0)
	return int(r), errno
}

func rawKill(pid int, sig syscall.Signal) syscall.Errno {
	_, _, errno := syscall.RawSyscall(syscall.SYS_KILL, uintptr(pid), uintptr(sig), 0)
	return errno
}

// rawSleep sleeps without parking the goroutine (so no timer has to wake it).
func rawSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
}
