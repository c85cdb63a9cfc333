package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/errdefs"
)

// TestDeploymentsOnOneEngine: three sandboxd on the one Docker engine — two
// with their own data dirs, a third sharing the first's data dir under a
// configured deployment name. The same tenant and conversation gets a
// sandbox in each; none lists, gets, deletes (by API or the CLI), counts or
// reaps another's.
func TestDeploymentsOnOneEngine(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 to run against the Docker engine")
	}
	dirA, dirB := t.TempDir(), t.TempDir()
	named := "e2e-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	cfgC := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, cfgC, "deployment: "+named+"\n")
	daemons := map[string]*daemon{
		"a": startDaemon(t, "docker", dirA),
		"b": startDaemon(t, "docker", dirB),
		"c": startDaemon(t, "docker", dirA, "--config", cfgC),
	}
	order := []string{"a", "b", "c"}

	sbs := map[string]api.Sandbox{}
	for _, k := range order {
		sb, err := daemons[k].Client.CreateSandbox(ctx(t), createReq("docker", "conv-deploy"))
		if err != nil {
			t.Fatalf("create in %s: %v", k, err)
		}
		sbs[k] = sb
		t.Cleanup(func() { daemons[k].Client.DeleteSandbox(ctx(t), sb.ID) })
	}
	if sbs["a"].ID == sbs["b"].ID || sbs["a"].ID == sbs["c"].ID || sbs["b"].ID == sbs["c"].ID {
		t.Fatalf("one conversation in three deployments got sandboxes %s, %s, %s; want three", sbs["a"].ID, sbs["b"].ID, sbs["c"].ID)
	}
	if !strings.HasPrefix(sbs["a"].Deployment, "dir-") || sbs["b"].Deployment == sbs["a"].Deployment || sbs["c"].Deployment != named {
		t.Fatalf("deployments a=%q b=%q c=%q; want two derived from the data dirs and %q", sbs["a"].Deployment, sbs["b"].Deployment, sbs["c"].Deployment, named)
	}
	// The engine's labels say the same.
	for _, k := range order {
		if got := containerLabel(t, sbs[k].ID, "io.sandboxd.deployment"); got != sbs[k].Deployment {
			t.Errorf("container of %s's sandbox is labelled deployment %q, want %q", k, got, sbs[k].Deployment)
		}
	}

	for _, k := range order {
		d := daemons[k]
		list, err := d.Client.ListSandboxes(ctx(t), "")
		if err != nil || len(list) != 1 || list[0].ID != sbs[k].ID {
			t.Errorf("%s lists %+v, %v; want only its own %s", k, list, err, sbs[k].ID)
		}
		if n := metricValue(t, d, `sandboxd_sandboxes{backend="docker",state="running"}`); n != 1 {
			t.Errorf("%s's /metrics counts %v running sandboxes, want its 1", k, n)
		}
		for _, o := range order {
			if o == k {
				continue
			}
			other := sbs[o].ID
			if _, err := d.Client.GetSandbox(ctx(t), other); !errors.Is(err, errdefs.ErrNotFound) {
				t.Errorf("%s's GET of %s's sandbox = %v, want not found", k, o, err)
			}
			if code := deleteStatus(t, d, other); code != http.StatusNotFound {
				t.Errorf("%s's DELETE of %s's sandbox = %d, want 404", k, o, code)
			}
			code, out := runCLI(t, "sandbox", "delete", other, "--addr", d.URL, "--data-dir", d.dataDir)
			if code != 1 || !strings.Contains(out, "does not exist") {
				t.Errorf("`sandboxd sandbox delete` of %s's sandbox through %s = exit %d, %q; want 1 and not found", o, k, code, out)
			}
		}
	}
	for _, k := range order {
		if got, err := daemons[k].Client.GetSandbox(ctx(t), sbs[k].ID); err != nil || got.State != "running" {
			t.Fatalf("%s's own sandbox after the others' deletes = %+v, %v; want it running", k, got, err)
		}
	}

	// c's idle reaper (same data dir as a) removes c's sandbox and never
	// a's or b's.
	writeFile(t, cfgC, "deployment: "+named+"\nidle_ttl: 1s\n")
	daemons["c"].restart()
	waitFor(t, time.Minute, "c reaps its idle sandbox", func() error {
		_, err := daemons["c"].Client.GetSandbox(ctx(t), sbs["c"].ID)
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("c's sandbox is still there: %v", err)
	})
	for _, k := range []string{"a", "b"} {
		if got, err := daemons[k].Client.GetSandbox(ctx(t), sbs[k].ID); err != nil || got.State != "running" {
			t.Errorf("%s's sandbox after c's reaper ran = %+v, %v; want it running", k, got, err)
		}
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// containerLabel reads a label of sandbox id's container from the engine.
func containerLabel(t *testing.T, id, key string) string {
	t.Helper()
	list, err := dockerClient(t).ContainerList(ctx(t), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("name", "sandboxd-"+id))})
	if err != nil || len(list) != 1 {
		t.Fatalf("container of sandbox %s: %d found, %v", id, len(list), err)
	}
	return list[0].Labels[key]
}

// metricValue is the value of one series on d's /metrics, -1 when absent.
func metricValue(t *testing.T, d *daemon, series string) float64 {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx(t), http.MethodGet, d.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+d.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metric %s = %q", series, v)
			}
			return f
		}
	}
	return -1
}

func deleteStatus(t *testing.T, d *daemon, id string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx(t), http.MethodDelete, d.URL+"/v1/sandboxes/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+d.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// runCLI runs the sandboxd command line and returns its exit status and
// its output (stdout and stderr).
func runCLI(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx(t), bins.sandboxd, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String()
	}
	t.Fatalf("sandboxd %v: %v", args, err)
	return 0, ""
}
