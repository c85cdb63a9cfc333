package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"
)

func TestProfilerOnlyOnLoopback(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, bad := range []string{"0.0.0.0:6060", ":6060", "example.com:6060", "127.0.0.1"} {
		t.Setenv(pprofEnv, bad)
		err := startProfiler(context.Background(), log)
		var u usageError
		if !errors.As(err, &u) {
			t.Errorf("%s=%q: err = %v, want a usage error", pprofEnv, bad, err)
		}
	}
	t.Setenv(pprofEnv, "")
	if err := startProfiler(context.Background(), log); err != nil {
		t.Errorf("unset: %v", err)
	}
}

func TestProfilerServesProfiles(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A port found free first: with port 0 the test could not know where.
	l, err := netListenFree()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(pprofEnv, l)
	if err := startProfiler(ctx, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + l + "/debug/pprof/mutex")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /debug/pprof/mutex: %s", resp.Status)
	}
}

// netListenFree returns a loopback address with a port that was free.
func netListenFree() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
