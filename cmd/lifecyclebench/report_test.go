package main

import (
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/bench"
)

func ms(v ...int) []time.Duration {
	var out []time.Duration
	for _, x := range v {
		out = append(out, time.Duration(x)*time.Millisecond)
	}
	return out
}

func sampleResults() results {
	const mib = 1 << 20
	b := &backendFigures{
		Pause: ms(10, 20, 30), Resume: ms(5, 6), AutoCall: ms(20), Running: ms(1, 1, 2),
		Hibernate: ms(60, 70), Wake: ms(300), HibernatedCall: ms(400), Cold: ms(200),
	}
	return results{
		Backends:   map[string]*backendFigures{"docker": b},
		Containerd: "not measured: no containerd socket at /nowhere",
		Sandboxd:   "v1",
		Took:       90 * time.Second,
		Fleet: fleetFigures{
			N:          2,
			Running:    stateUse{Memory: []int64{80 * mib, 100 * mib}, Shim: []int64{10 * mib, 10 * mib}, Layer: []int64{mib, mib}, Workspace: []int64{0, 0}},
			Paused:     stateUse{Memory: []int64{90 * mib, 90 * mib}, Shim: []int64{10 * mib, 10 * mib}, Layer: []int64{mib, mib}, Workspace: []int64{0, 0}},
			Hibernated: stateUse{Memory: []int64{0, 0}, Shim: []int64{0, 0}, Layer: []int64{mib, mib}, Workspace: []int64{512, 512}},
			MemTotal:   1000 * mib, DiskFree: 1 << 30, DiskPath: "/var/lib/docker",
		},
	}
}

// TestRenderSaysWhatWasMeasured: every figure of the backends measured is a
// row, a backend not measured has none and the line says why, the fleet's
// fits are the machine's memory over the mean per sandbox, and the section
// passes the smoke run's check.
func TestRenderSaysWhatWasMeasured(t *testing.T) {
	f := flags{image: "img:1", pauses: 3, autos: 1, running: 3, hibernates: 1, colds: 1}
	body := render(f, "a machine", "0.1 0.2 0.3", time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC), sampleResults())
	for _, want := range []string{
		"| **pause**: `POST /v1/sandboxes/{id}/pause` of a running sandbox until 200 | docker | 3 | 20.0 ms | 30.0 ms | 30.0 ms |",
		"| **first call after a hibernation**: the same `read`, the wake included | docker | 1 | 400 ms | 400 ms | 400 ms |",
		"not measured: no containerd socket at /nowhere",
		"| sandboxd on docker, paused: first call, resume included | 20.0 ms (10.0x faster than a cold create) | measured here |",
		"| sandboxd on docker, hibernated: first call, wake included | 400 ms (2.0x slower than a cold create) | measured here |",
		"| E2B: resume of a paused sandbox | about 1 s | published, not measured here |",
		// (80+100)/2 + 10 = 100 MiB of 1000 MiB: 10 fit.
		"| **running** | 90.0 MiB (80.0 MiB–100.0 MiB) | 10.0 MiB | 100.0 MiB | 10 | 1024 KiB + 0 B |",
		"| **hibernated** | 0.0 MiB (0.0 MiB–0.0 MiB) | 0.0 MiB | 0.0 MiB | no memory held | 1024 KiB + 512 B (1023 fit in the 1.0 GiB free under /var/lib/docker) |",
		"A paused sandbox holds 100% of a running one's memory",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the section lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "| containerd |") {
		t.Errorf("a backend not measured has rows:\n%s", body)
	}
	if err := bench.CheckSmoke(filepath.Join(t.TempDir(), "BENCHMARKS.md"), "lifecycle", bench.WithStamp(body), io.Discard); err != nil {
		t.Fatal(err)
	}
}

func TestVersus(t *testing.T) {
	for _, c := range []struct {
		cold, p time.Duration
		want    string
	}{
		{200 * time.Millisecond, 20 * time.Millisecond, " (10.0x faster than a cold create)"},
		{200 * time.Millisecond, 400 * time.Millisecond, " (2.0x slower than a cold create)"},
		{200 * time.Millisecond, 205 * time.Millisecond, " (about as fast as a cold create)"},
		{0, 20 * time.Millisecond, ""},
	} {
		if got := versus(c.cold, c.p); got != c.want {
			t.Errorf("versus(%s, %s) = %q, want %q", c.cold, c.p, got, c.want)
		}
	}
}
