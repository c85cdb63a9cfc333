package agent_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/daemon"
	"github.com/sandboxd/sandboxd/agent/proto"
)

// Writes of different files in one workspace may run at once (two runs of a
// conversation writing their own files): every batch commits whole, each
// file ends with its last write, and no journal is left behind.
func TestConcurrentWritesOfDifferentFiles(t *testing.T) {
	state := t.TempDir()
	srv := daemon.New(daemon.WithStateDir(state)) // writes go through the journal, as in a sandbox
	a, b := net.Pipe()
	go srv.ServeConn(context.Background(), b)
	c, err := agent.NewClient(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); srv.Close() })
	root := t.TempDir()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Go(func() {
			name := fmt.Sprintf("dir%d/file%d.txt", w%4, w)
			for i := range 25 {
				data := fmt.Appendf(nil, "writer %d round %d\n", w, i)
				if err := c.WriteFiles(ctx, &proto.WriteFilesRequest{Root: root, Files: []proto.WriteFile{{Path: name, Data: data, MkdirAll: true}}}); err != nil {
					errs <- fmt.Errorf("writer %d round %d: %w", w, i, err)
					return
				}
				got, err := c.ReadFile(ctx, &proto.ReadFileRequest{Root: root, Path: name})
				if err != nil || string(got.Data) != string(data) {
					errs <- fmt.Errorf("writer %d round %d read %q, %v; want its own write %q", w, i, got.Data, err, data)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for w := range 16 {
		b, err := os.ReadFile(filepath.Join(root, fmt.Sprintf("dir%d/file%d.txt", w%4, w)))
		if want := fmt.Sprintf("writer %d round 24\n", w); err != nil || string(b) != want {
			t.Fatalf("file of writer %d holds %q (%v), want %q", w, b, err, want)
		}
	}
	left, _ := filepath.Glob(filepath.Join(root, "dir*", ".*"))
	if len(left) > 0 {
		t.Fatalf("staged or backup files left in the workspace: %v", left)
	}
	var journals []string
	filepath.WalkDir(state, func(p string, d os.DirEntry, err error) error {
		if err == nil && filepath.Ext(p) == ".journal" {
			journals = append(journals, p)
		}
		return nil
	})
	if len(journals) > 0 {
		t.Fatalf("journals left after every batch was answered: %v", journals)
	}
}
