package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/docker/docker/client"
)

// Machine is what a reader needs to judge figures from another computer.
type Machine struct {
	Cores     int
	CPU       string // model name from /proc/cpuinfo, "" when unknown
	Kernel    string
	Docker    string // server version
	DockerAPI string
	Storage   string // storage driver
	Cgroup    string // cgroup driver and version
}

// String is one line for BENCHMARKS.md.
func (m Machine) String() string {
	cpu := ""
	if m.CPU != "" {
		cpu = " (" + m.CPU + ")"
	}
	return fmt.Sprintf("%d cores%s, Linux %s, Docker Engine %s (API %s, %s, cgroup %s)",
		m.Cores, cpu, m.Kernel, m.Docker, m.DockerAPI, m.Storage, m.Cgroup)
}

// DescribeMachine reads the local facts and asks the engine for its own.
func DescribeMachine(ctx context.Context, cli *client.Client) (Machine, error) {
	m := Machine{Cores: runtime.NumCPU(), CPU: cpuModel(), Kernel: kernel()}
	v, err := cli.ServerVersion(ctx)
	if err != nil {
		return m, fmt.Errorf("the Docker engine does not tell its version: %w", err)
	}
	m.Docker, m.DockerAPI = v.Version, v.APIVersion
	info, err := cli.Info(ctx)
	if err != nil {
		return m, fmt.Errorf("the Docker engine does not describe itself: %w", err)
	}
	m.Storage = info.Driver
	m.Cgroup = info.CgroupDriver + " v" + info.CgroupVersion
	return m, nil
}

func kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return runtime.GOOS
	}
	return strings.TrimSpace(string(b))
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// LoadAverage is the 1-, 5- and 15-minute load average from /proc/loadavg
// ("1.18 1.27 1.30"), or "" when unreadable: on a shared machine it says
// how much else was running while the figures were taken.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// DescribeLocalMachine describes this machine and the Docker engine that
// DOCKER_HOST (or the default socket) names.
func DescribeLocalMachine(ctx context.Context) (string, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return "", err
	}
	defer cli.Close()
	m, err := DescribeMachine(ctx, cli)
	if err != nil {
		return "", err
	}
	return m.String(), nil
}
