package daemon

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/sandboxd/sandboxd/errdefs"
)

// account is an account of the sandbox that a command runs as
// (ExecRequest.User, ProcStartRequest.User) or a write's new files belong
// to (WriteFilesRequest.Owner). The agent runs inside the sandbox, so
// os/user reads the sandbox's own /etc/passwd and /etc/group (the static
// agent has no C library: its lookups are Go's own reading of those files).
type account struct {
	name   string
	uid    uint32
	gid    uint32   // the primary group
	groups []uint32 // every group the account is in, the primary among them
	home   string
}

// lookupAccount finds the account named name, or with that numeric uid.
// nil for "": the agent's own user, with nothing changed.
func lookupAccount(name string) (*account, error) {
	if name == "" {
		return nil, nil
	}
	if strings.ContainsAny(name, "\x00:\n") || len(name) > 256 {
		return nil, unknownAccount(name)
	}
	u, err := user.Lookup(name)
	var unknown user.UnknownUserError
	if errors.As(err, &unknown) {
		if _, nerr := strconv.ParseUint(name, 10, 32); nerr == nil {
			u, err = user.LookupId(name)
		}
	}
	if err != nil {
		var unknownID user.UnknownUserIdError
		if errors.As(err, &unknown) || errors.As(err, &unknownID) {
			return nil, unknownAccount(name)
		}
		return nil, errdefs.FailedPrecondition("cannot read the sandbox's accounts to find user %q (%v); check its /etc/passwd", name, err)
	}
	uid, uerr := strconv.ParseUint(u.Uid, 10, 32)
	gid, gerr := strconv.ParseUint(u.Gid, 10, 32)
	if uerr != nil || gerr != nil {
		return nil, errdefs.FailedPrecondition("user %q has uid %q and gid %q in the sandbox's /etc/passwd, which are not numbers; fix the account", name, u.Uid, u.Gid)
	}
	a := &account{name: u.Username, uid: uint32(uid), gid: uint32(gid), home: u.HomeDir}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, errdefs.FailedPrecondition("cannot read the groups of user %q in the sandbox (%v); check its /etc/group", name, err)
	}
	for _, s := range ids {
		if g, err := strconv.ParseUint(s, 10, 32); err == nil && !slices.Contains(a.groups, uint32(g)) {
			a.groups = append(a.groups, uint32(g))
		}
	}
	if !slices.Contains(a.groups, a.gid) {
		a.groups = append(a.groups, a.gid)
	}
	if euid := os.Geteuid(); euid != 0 && a.uid != uint32(euid) {
		return nil, errdefs.FailedPrecondition("the sandbox agent runs as uid %d, not root, so it cannot act as user %q (uid %d); give no user, or run the agent as root", euid, name, a.uid)
	}
	return a, nil
}

func unknownAccount(name string) error {
	return errdefs.NotFound("user %q does not exist in the sandbox; give an account of its /etc/passwd (or none for root)", name)
}

// credential is what a process started as a runs with; nil when it is the
// agent's own user and the agent is not root (which could not set groups,
// and needs nothing changed).
func (a *account) credential() *syscall.Credential {
	if a == nil || os.Geteuid() != 0 {
		return nil
	}
	return &syscall.Credential{Uid: a.uid, Gid: a.gid, Groups: slices.Clone(a.groups)}
}

// env is what a command run as a gets over the sandbox's environment and
// under its request's own: who it is and where its home is, as a login
// would set them.
func (a *account) env() []string {
	return []string{"HOME=" + a.home, "USER=" + a.name, "LOGNAME=" + a.name}
}

// dir is where a command run as a starts when its request names no
// directory: the account's home, or "/" when that is not a directory (an
// account like nobody, whose home is /nonexistent), as login(1) does.
func (a *account) dir() string {
	if fi, err := os.Stat(a.home); err == nil && fi.IsDir() {
		return a.home
	}
	return "/"
}

// username is how a's processes are listed; "" for the agent's own user.
func (a *account) username() string {
	if a == nil {
		return ""
	}
	return a.name
}

// credArg and parseCredArg carry a credential to the contain supervisor
// (procs_contain.go), which starts the command with it: "UID:GID:G1,G2".
func credArg(c *syscall.Credential) string {
	gs := make([]string, len(c.Groups))
	for i, g := range c.Groups {
		gs[i] = strconv.FormatUint(uint64(g), 10)
	}
	return fmt.Sprintf("%d:%d:%s", c.Uid, c.Gid, strings.Join(gs, ","))
}

func parseCredArg(s string) (*syscall.Credential, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return nil, fmt.Errorf("credential %q is not UID:GID:GROUPS", s)
	}
	uid, err := strconv.ParseUint(parts[0], 10, 32)
	if err != nil {
		return nil, fmt.Errorf("credential %q: uid: %w", s, err)
	}
	gid, err := strconv.ParseUint(parts[1], 10, 32)
	if err != nil {
		return nil, fmt.Errorf("credential %q: gid: %w", s, err)
	}
	c := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	if parts[2] != "" {
		for _, g := range strings.Split(parts[2], ",") {
			n, err := strconv.ParseUint(g, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("credential %q: group: %w", s, err)
			}
			c.Groups = append(c.Groups, uint32(n))
		}
	}
	return c, nil
}
