package main

import (
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/bench"
)

func sampleWorkspaces() []*workspaceFigures {
	const mib = 1 << 20
	return []*workspaceFigures{
		{
			Bytes: 100 * mib, Snapshot: ms(700, 800, 900),
			Fork:      map[int][]time.Duration{1: ms(1500, 1600, 1700), 10: ms(9000, 10000, 12000)},
			FirstCall: ms(60, 70, 80), FirstCallOne: ms(60, 70, 80),
			SizeBytes: []int64{100 * mib, 100 * mib},
			SnapDisk:  []diskUse{{Layer: 0, Volume: 100 * mib}},
			CopyDisk:  []diskUse{{Layer: 2048, Volume: 100 * mib}, {Layer: 0, Volume: 100 * mib}},
			FSGrowth:  map[int][]int64{1: {200 * mib}, 10: {1100 * mib}},
		},
		{
			Bytes: 1 << 30, Snapshot: ms(4200),
			Fork:      map[int][]time.Duration{1: ms(8900), 10: ms(56700)},
			FirstCall: ms(80), FirstCallOne: ms(100),
			SizeBytes: []int64{1 << 30}, SnapDisk: []diskUse{{Volume: 1 << 30}}, CopyDisk: []diskUse{{Volume: 1 << 30}},
			FSGrowth: map[int][]int64{10: {-5 * mib}},
		},
	}
}

// TestRenderSnapshots: a column per workspace size, a row per figure with
// the per-copy time of the larger fork, the fork's time and first call set
// against the cold create of the same run, the disk means, the peers
// labelled as published, and why containerd is left out.
func TestRenderSnapshots(t *testing.T) {
	r := sampleResults()
	r.Workspaces, r.Copies = sampleWorkspaces(), []int{1, 10}
	r.SnapContainerd = "not measured: sandboxd on containerd answers that the containerd backend cannot take snapshots of a sandbox"
	f := flags{image: "img:1", pauses: 3, autos: 1, running: 3, hibernates: 1, colds: 1, snapshots: 3}
	body := render(f, "a machine", "0.1 0.2 0.3", time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC), r)
	for _, want := range []string{
		"## Lifecycle: pause, hibernate, resume, snapshots, forks",
		"Docker only; containerd not measured: sandboxd on containerd answers that the containerd backend cannot take snapshots of a sandbox.",
		"| figure (Docker) | 100 MiB workspace | 1 GiB workspace |",
		"| **snapshot**: `POST /v1/sandboxes/{id}/snapshots` until 201 | 800 ms (max 900 ms, n 3) | 4.20 s (n 1) |",
		"| **fork into 10 copies**: `POST /v1/sandboxes/{id}/fork` until 201, the whole request | 10.0 s (max 12.0 s, n 3) | 56.7 s (n 1) |",
		"| **fork into 1 copy**: `POST /v1/sandboxes/{id}/fork` until 201, the whole request (its one copy's time) | 1.60 s (max 1.70 s, n 3) | 8.90 s (n 1) |",
		"| … per copy (the whole request ÷ 10) | 1.00 s (max 1.20 s, n 3) | 5.67 s (n 1) |",
		// 1.6 s + 70 ms next to the 200 ms cold create.
		"| **fork into 1 copy + its first call**, p50s added | 1.67 s (8.3x slower than a cold create) | 9.00 s (45.0x slower than a cold create) |",
		"| **cold create + first call** (same run, above: no snapshot, a small workspace) | 200 ms | 200 ms |",
		"| disk: the engine's growth per copy: writable layer + workspace volume | 1 KiB + 100.0 MiB | 0 B + 1.00 GiB |",
		"| disk, cross-check: the data root's used space grew, over a fork into 10 copies | 1.07 GiB (100.0 MiB for each of the 11 workspace copies, the snapshot's and the copies') | shrank 5120 KiB (other work on the machine) |",
		"| sandboxd on Docker: fork into 1 copy + its first call, 1 GiB workspace | 9.00 s | measured here |",
		"| Morph: branch of a running machine | under 250 ms | published, not measured here |",
		"(100 MiB: 3, 1 GiB: 1;",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the section lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "per copy (the whole request ÷ 1)") {
		t.Errorf("a fork into 1 copy has a per-copy row:\n%s", body)
	}
	if err := bench.CheckSmoke(filepath.Join(t.TempDir(), "BENCHMARKS.md"), "lifecycle", bench.WithStamp(body), io.Discard); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotPlan: the full run measures 100 MiB and 1 GiB forked into 1
// and 10 copies, the 1 GiB rows once; the smoke run one small workspace
// into one copy.
func TestSnapshotPlan(t *testing.T) {
	p := flags{snapshots: 3}.snapshotPlan()
	if len(p.Sizes) != 2 || p.Sizes[0] != 100<<20 || p.Sizes[1] != 1<<30 || len(p.Copies) != 2 || p.Copies[0] != 1 || p.Copies[1] != 10 {
		t.Fatalf("full plan: %+v", p)
	}
	if p.Samples(100<<20) != 3 || p.Samples(1<<30) != 1 {
		t.Fatalf("full plan samples: %d, %d", p.Samples(100<<20), p.Samples(1<<30))
	}
	s := flags{snapshots: 3, smoke: true}.snapshotPlan()
	if len(s.Sizes) != 1 || s.Sizes[0] > 8<<20 || len(s.Copies) != 1 || s.Copies[0] != 1 || s.Samples(s.Sizes[0]) != 1 {
		t.Fatalf("smoke plan: %+v", s)
	}
}

func TestWholeBlob(t *testing.T) {
	for _, c := range []struct {
		out  string
		n    int64
		want bool
	}{
		{"exit 0\nsize=104857600\n", 104857600, true},
		{"size=1048576000", 104857600, false}, // a prefix is not the size
		{"stat: cannot stat 'blob.bin'\nsize=", 104857600, false},
		{"", 1, false},
	} {
		if got := wholeBlob(c.out, c.n); got != c.want {
			t.Errorf("wholeBlob(%q, %d) = %v, want %v", c.out, c.n, got, c.want)
		}
	}
}

func TestSizeNames(t *testing.T) {
	if got := sizeName(100 << 20); got != "100 MiB" {
		t.Errorf("sizeName(100 MiB) = %q", got)
	}
	if got := sizeName(1 << 30); got != "1 GiB" {
		t.Errorf("sizeName(1 GiB) = %q", got)
	}
	if got := dur(56700 * time.Millisecond); got != "56.7 s" {
		t.Errorf("dur(56.7 s) = %q", got)
	}
	if got := diskSize(11 << 30); got != "11.00 GiB" {
		t.Errorf("diskSize(11 GiB) = %q", got)
	}
}
