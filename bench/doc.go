// Package bench holds the measuring logic of sandboxd's benchmark command
// (cmd/sandboxd-bench): latency summaries, the peer `docker exec cat` call,
// checks that a benchmark read what it should have, process memory from
// /proc, machine facts, and the marker-delimited sections of BENCHMARKS.md
// that a rerun replaces one at a time, and the sandboxd child that the
// benchmark commands start (Daemon).
package bench
