package bench

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is USER_HZ, the unit of /proc/<pid>/stat's CPU times; it is
// 100 on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// CPUTime returns the user plus system CPU time process pid has used so
// far (utime and stime of /proc/<pid>/stat, all its threads).
func CPUTime(pid int) (time.Duration, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("the CPU time of process %d cannot be read: %w", pid, err)
	}
	defer f.Close()
	return ParseStatCPU(f)
}

// ParseStatCPU reads utime + stime off a /proc/<pid>/stat line. The command
// name (field 2) is in parentheses and may hold spaces, so fields are
// counted from the last ')'.
func ParseStatCPU(r io.Reader) (time.Duration, error) {
	b, err := io.ReadAll(io.LimitReader(r, 64<<10))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("the stat line %.40q has no command name in parentheses", s)
	}
	// After ")": state is field 3; utime and stime are fields 14 and 15.
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("the stat line has %d fields after the command name, want at least 13", len(f))
	}
	var total int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("the stat line's CPU time %q is not a number", v)
		}
		total += n
	}
	return time.Duration(total) * clockTick, nil
}
