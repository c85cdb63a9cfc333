package daemon

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// BenchmarkWriteBatch10 commits a batch of ten 4 KiB files (each replacing
// an existing one) with the crash journal and without it (all or nothing
// then only while the agent lives). Each iteration commits both, one after
// the other, so a busy machine slows both alike; the medians are reported
// as journal-ms and no-journal-ms:
//
//	go test ./agent/daemon -run '^$' -bench WriteBatch10 -benchtime 300x
//
// Set SANDBOXD_BENCH_DIR to measure on another file system than the
// test's temporary directory.
func BenchmarkWriteBatch10(b *testing.B) {
	base := os.Getenv("SANDBOXD_BENCH_DIR")
	if base == "" {
		base = b.TempDir()
	}
	type side struct {
		req   *proto.WriteFilesRequest
		env   commitEnv
		times []time.Duration
	}
	data := make([]byte, 4096)
	newSide := func(journaled bool) *side {
		dir, err := os.MkdirTemp(base, "bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		root := filepath.Join(dir, "ws")
		os.Mkdir(root, 0o755)
		s := &side{}
		if journaled {
			if s.env.journal, err = openJournal(filepath.Join(dir, "state"), slog.New(slog.DiscardHandler)); err != nil {
				b.Fatal(err)
			}
		}
		files := make([]proto.WriteFile, 10)
		for i := range files {
			files[i] = proto.WriteFile{Path: fmt.Sprintf("pkg/f%d.go", i), Data: data, MkdirAll: true}
		}
		s.req = &proto.WriteFilesRequest{Root: root, Files: files}
		if err := writeFiles(s.req, s.env); err != nil {
			b.Fatal(err)
		}
		return s
	}
	sides := []*side{newSide(true), newSide(false)}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		data[0] = byte(i)
		for _, s := range sides {
			start := time.Now()
			if err := writeFiles(s.req, s.env); err != nil {
				b.Fatal(err)
			}
			s.times = append(s.times, time.Since(start))
		}
	}
	median := func(ts []time.Duration) float64 {
		slices.Sort(ts)
		return float64(ts[len(ts)/2]) / float64(time.Millisecond)
	}
	b.ReportMetric(median(sides[0].times), "journal-ms")
	b.ReportMetric(median(sides[1].times), "no-journal-ms")
}
