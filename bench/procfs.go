package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// RSS returns the resident set size of process pid in bytes (VmRSS from
// /proc/<pid>/status).
func RSS(pid int) (int64, error) { return statusKB(pid, "VmRSS") }

// AnonRSS returns the private part of the resident set (RssAnon): VmRSS
// also counts the executable's own pages that were read, which the kernel
// shares and can drop.
func AnonRSS(pid int) (int64, error) { return statusKB(pid, "RssAnon") }

func statusKB(pid int, key string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("the memory of process %d cannot be read: %w", pid, err)
	}
	defer f.Close()
	return ParseStatusKB(f, key)
}

// ParseVmRSS finds the VmRSS line of a /proc/<pid>/status text ("VmRSS:
// 12345 kB") and returns it in bytes.
func ParseVmRSS(r io.Reader) (int64, error) { return ParseStatusKB(r, "VmRSS") }

// ParseStatusKB finds the line "<key>: <n> kB" of a /proc/<pid>/status text
// and returns n in bytes.
func ParseStatusKB(r io.Reader, key string) (int64, error) {
	sc := bufio.NewScanner(io.LimitReader(r, 1<<20))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), key+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("the %s line %q is not \"<number> kB\"", key, sc.Text())
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 {
			return 0, fmt.Errorf("the %s line %q has no usable number", key, sc.Text())
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("the status text has no %s line (a kernel thread or an exited process)", key)
}

// PodProcess finds the host pid of the process of a pod on this machine
// (the test cluster runs here) whose command line contains cmd and whose
// environment sets POD_NAME=pod (the chart sets it).
func PodProcess(pod, cmd string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		line, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if !strings.Contains(string(line), cmd) {
			continue
		}
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		for _, kv := range strings.Split(string(env), "\x00") {
			if kv == "POD_NAME="+pod {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("no process %q of pod %s on this machine", cmd, pod)
}
