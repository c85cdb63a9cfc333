package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"time"
)

// pprofEnv names a loopback address (such as 127.0.0.1:6060) on which
// sandboxd serves Go's profiles, with mutex and block profiling on; unset,
// nothing is served. It is for finding where calls queue under load
// (sandboxd-bench --only load), not for production: the profiles have no
// authentication, so only a loopback address is accepted.
const pprofEnv = "SANDBOXD_PPROF"

// startProfiler serves the profiles when pprofEnv is set, until ctx ends.
func startProfiler(ctx context.Context, log *slog.Logger) error {
	addr := os.Getenv(pprofEnv)
	if addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return usagef("%s=%q is not a loopback address with a port; give one such as 127.0.0.1:6060", pprofEnv, addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	runtime.SetMutexProfileFraction(5)
	runtime.SetBlockProfileRate(int(100 * time.Microsecond))
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("the profile server stopped", "err", err)
		}
	}()
	context.AfterFunc(ctx, func() { srv.Close() })
	log.Warn("serving Go profiles without authentication", "addr", l.Addr().String(), "env", pprofEnv)
	return nil
}
