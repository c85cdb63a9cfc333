package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"
)

// tryAcquire reports whether acquiring key's scope returns within a moment
// (the release func when it does).
func tryAcquire(t *testing.T, s *serializer, key string, scope []string) (func(), bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	rel, err := s.acquireScoped(ctx, key, scope)
	return rel, err == nil
}

func TestScopedTurns(t *testing.T) {
	s := newSerializer()
	a, ok := tryAcquire(t, s, "k", []string{"a.txt"})
	if !ok {
		t.Fatal("the first write did not get its turn")
	}
	b, ok := tryAcquire(t, s, "k", []string{"b.txt"})
	if !ok {
		t.Fatal("a write of another file waited for the first")
	}
	if _, ok := tryAcquire(t, s, "k", []string{"a.txt"}); ok {
		t.Fatal("a second write of a.txt ran beside the first")
	}
	if _, ok := tryAcquire(t, s, "k", nil); ok {
		t.Fatal("a whole-conversation call (a shell) ran beside the writes")
	}
	other, ok := tryAcquire(t, s, "other", nil)
	if !ok {
		t.Fatal("another conversation waited")
	}
	other()
	a()
	if _, ok := tryAcquire(t, s, "k", nil); ok {
		t.Fatal("a shell ran while a write of b.txt still held its turn")
	}
	b()
	rel, ok := tryAcquire(t, s, "k", nil)
	if !ok {
		t.Fatal("a shell waited with no write left")
	}
	rel()
	if len(s.lines) != 0 {
		t.Fatalf("%d lines left", len(s.lines))
	}
}

// A write that arrives behind a waiting shell does not overtake it, even
// when it conflicts with nothing held: the shell's turn comes first.
func TestScopedTurnsDoNotOvertakeAWaitingShell(t *testing.T) {
	s := newSerializer()
	w1, _ := s.acquireScoped(context.Background(), "k", []string{"a.txt"})
	var order []string
	var mu sync.Mutex // guards order
	note := func(what string) { mu.Lock(); order = append(order, what); mu.Unlock() }
	var wg sync.WaitGroup
	wg.Go(func() {
		rel, _ := s.acquire(context.Background(), "k")
		note("shell")
		time.Sleep(20 * time.Millisecond)
		rel()
	})
	waitFor(t, func() bool { return s.queued("k") == 1 })
	wg.Go(func() {
		rel, _ := s.acquireScoped(context.Background(), "k", []string{"b.txt"})
		note("write b.txt")
		rel()
	})
	waitFor(t, func() bool { return s.queued("k") == 2 })
	w1()
	wg.Wait()
	if fmt.Sprint(order) != "[shell write b.txt]" {
		t.Fatalf("order %v, want the shell before the later write", order)
	}
}

// A canceled waiter in the middle lets the ones behind it that it alone
// held back go at once.
func TestCanceledScopedWaiterFreesThoseBehind(t *testing.T) {
	s := newSerializer()
	held, _ := s.acquireScoped(context.Background(), "k", []string{"a.txt"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := s.acquire(ctx, "k"); done <- err }() // a shell, waiting for a.txt
	waitFor(t, func() bool { return s.queued("k") == 1 })
	got := make(chan func(), 1)
	go func() { rel, _ := s.acquireScoped(context.Background(), "k", []string{"b.txt"}); got <- rel }()
	waitFor(t, func() bool { return s.queued("k") == 2 })
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the canceled shell got a turn")
	}
	select {
	case rel := <-got:
		rel()
	case <-time.After(5 * time.Second):
		t.Fatal("the write of b.txt still waits after the shell before it left")
	}
	held()
	if len(s.lines) != 0 {
		t.Fatalf("%d lines left", len(s.lines))
	}
}

// Through the registry: writes of two files by two runs of one conversation
// overlap; writes of one file never do; the Scope a tool gives is what
// decides.
func TestRegistryRunsScopedCallsSideBySide(t *testing.T) {
	r := NewRegistry()
	var mu sync.Mutex // guards running, peak and perFile
	running, peak := 0, 0
	perFile := map[string]int{}
	overlapSameFile := false
	w := &scopedFake{fakeTool: newFake("write", LevelWrite, false)}
	w.call = func(ctx context.Context, env *Env, args json.RawMessage) (Result, error) {
		var a struct{ Path string }
		json.Unmarshal(args, &a)
		mu.Lock()
		running++
		peak = max(peak, running)
		perFile[a.Path]++
		if perFile[a.Path] > 1 {
			overlapSameFile = true
		}
		mu.Unlock()
		time.Sleep(30 * time.Millisecond)
		mu.Lock()
		running--
		perFile[a.Path]--
		mu.Unlock()
		return Text("ok"), nil
	}
	r.Register(w)
	env := envFor("default", true)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			path := fmt.Sprintf("f%d.txt", i%4)
			if _, err := r.Call(context.Background(), env, "write", json.RawMessage(`{"path":"`+path+`"}`)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if overlapSameFile {
		t.Fatal("two writes of one file ran at the same time")
	}
	if peak < 2 {
		t.Fatalf("at most %d writes ran at once, want writes of different files side by side", peak)
	}
}

type scopedFake struct{ *fakeTool }

func (f *scopedFake) Scope(_ *Env, args json.RawMessage) ([]string, bool) {
	var a struct{ Path string }
	if json.Unmarshal(args, &a) != nil || a.Path == "" {
		return nil, false
	}
	return []string{a.Path}, true
}
