package daemon

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// maxPtyCells bounds a terminal's rows and columns.
const maxPtyCells = 10000

// openPty makes a pseudo-terminal of the given size: the master, which the
// daemon reads and writes (non-blocking, so that closing it ends a read),
// and the slave, which the process gets as its stdio and controlling
// terminal.
func openPty(size proto.PtySize) (master, slave *os.File, err error) {
	mfd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, errdefs.FailedPrecondition("the sandbox cannot make a terminal (/dev/ptmx: %v); start the process without pty", err)
	}
	fail := func(what string, err error) (*os.File, *os.File, error) {
		unix.Close(mfd)
		return nil, nil, errdefs.Internal("cannot make a terminal: %s: %v", what, err)
	}
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		return fail("unlockpt", err)
	}
	sfd, err := openPtyPeer(mfd)
	if err != nil {
		return fail("open the terminal's slave", err)
	}
	if err := unix.IoctlSetWinsize(mfd, unix.TIOCSWINSZ, &unix.Winsize{Row: size.Rows, Col: size.Cols}); err != nil {
		unix.Close(sfd)
		return fail("set its size", err)
	}
	if err := unix.SetNonblock(mfd, true); err != nil {
		unix.Close(sfd)
		return fail("make it non-blocking", err)
	}
	return os.NewFile(uintptr(mfd), "/dev/ptmx"), os.NewFile(uintptr(sfd), "pty-slave"), nil
}

// openPtyPeer opens the slave of master: with TIOCGPTPEER (Linux 4.13),
// which needs no path and so works whatever /dev/pts the sandbox mounts,
// else by its name in /dev/pts.
func openPtyPeer(mfd int) (int, error) {
	fd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(mfd), uintptr(unix.TIOCGPTPEER), uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
	if errno == 0 {
		return int(fd), nil
	}
	n, err := unix.IoctlGetInt(mfd, unix.TIOCGPTN)
	if err != nil {
		return -1, fmt.Errorf("ptsname: %w", err)
	}
	return unix.Open(fmt.Sprintf("/dev/pts/%d", n), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
}

// setPtySize resizes the terminal; the kernel sends SIGWINCH to its
// foreground process group.
func setPtySize(master *os.File, size proto.PtySize) error {
	rc, err := master.SyscallConn()
	if err != nil {
		return err
	}
	var ioErr error
	if err := rc.Control(func(fd uintptr) {
		ioErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: size.Rows, Col: size.Cols})
	}); err != nil {
		return err
	}
	return ioErr
}

// checkPtySize refuses a size a terminal cannot have.
func checkPtySize(rows, cols uint16) error {
	if rows == 0 || cols == 0 || rows > maxPtyCells || cols > maxPtyCells {
		return errdefs.InvalidArgument("terminal size %dx%d is not valid; give rows and cols from 1 to %d", rows, cols, maxPtyCells)
	}
	return nil
}

// isPtyEnd reports whether err from reading a master means the terminal's
// other side is closed (EIO, once every process has closed it).
func isPtyEnd(err error) bool {
	return errors.Is(err, syscall.EIO)
}
