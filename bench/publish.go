package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// CommitEnv names the variable scripts/bench.sh sets to `git describe` once
// per run, so every section of one `make bench` carries the same commit.
const CommitEnv = "SANDBOXD_BENCH_COMMIT"

// SmokeEnv names the variable that puts the benchmarks written as go tests
// (debug, eval) in smoke mode, as --smoke does for the commands.
const SmokeEnv = "SANDBOXD_BENCH_SMOKE"

// SmokeFromEnv reports whether SmokeEnv asks for a smoke run.
func SmokeFromEnv() bool { return os.Getenv(SmokeEnv) == "1" }

// Commit is the commit the figures come from: CommitEnv when set, else
// `git describe --tags --always --dirty` in the working directory, else
// "unknown" (a copy outside git).
func Commit() string {
	if c := os.Getenv(CommitEnv); c != "" {
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "describe", "--tags", "--always", "--dirty").Output()
	if c := strings.TrimSpace(string(out)); err == nil && c != "" {
		return c
	}
	return "unknown"
}

// Stamp is the last line of every section: which commit produced the
// figures and when, so a section older than the code says so.
func Stamp(commit string, at time.Time) string {
	return fmt.Sprintf("_Generated from commit `%s` on %s._", commit, at.UTC().Format("2006-01-02 15:04 UTC"))
}

// Publish ends body with the stamp and replaces section name of the file at
// path with it. In a smoke run (minimal sizes, figures that mean nothing)
// the file is left alone: the section goes into a temporary copy of it,
// which is read back to check that the section parses and holds what was
// rendered, and the copy is removed; log gets one line saying so.
func Publish(path, name, body string, smoke bool, log io.Writer) error {
	body = WithStamp(body)
	if !smoke {
		return WriteSection(path, name, body)
	}
	return CheckSmoke(path, name, body, log)
}

// WithStamp ends body with the stamp of Commit and now.
func WithStamp(body string) string {
	return strings.TrimRight(body, "\n") + "\n\n" + Stamp(Commit(), time.Now())
}

// CheckSmoke is a smoke run's write: body goes into section name of a
// temporary copy of the file at path, which is read back and removed.
func CheckSmoke(path, name, body string, log io.Writer) error {
	if err := checkRendered(name, body); err != nil {
		return err
	}
	doc, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	next, err := ReplaceSection(string(doc), name, body)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp("", "bench-smoke-*.md")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(next); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	back, err := os.ReadFile(tmp.Name())
	if err != nil {
		return err
	}
	got, err := ReadSection(string(back), name)
	if err != nil {
		return fmt.Errorf("smoke: the %s section written does not read back: %w", name, err)
	}
	if got != strings.Trim(body, "\n") {
		return fmt.Errorf("smoke: the %s section read back differs from the one rendered", name)
	}
	fmt.Fprintf(log, "smoke: section %s renders and reads back (%d lines); %s left unchanged\n", name, strings.Count(got, "\n")+1, path)
	return nil
}

// checkRendered is what a smoke run asks of a section beyond its markers: a
// heading, at least one table row, and no figure rendered from nothing.
func checkRendered(name, body string) error {
	if !strings.HasPrefix(strings.TrimLeft(body, "\n"), "## ") {
		return fmt.Errorf("smoke: the %s section does not start with a \"## \" heading", name)
	}
	if !strings.Contains(body, "\n| ") {
		return fmt.Errorf("smoke: the %s section has no table", name)
	}
	if strings.Contains(body, "%!") {
		return fmt.Errorf("smoke: the %s section has a formatting error: %q", name, body[strings.Index(body, "%!"):min(len(body), strings.Index(body, "%!")+40)])
	}
	return nil
}

// EnvOr is the environment variable k, or def when it is unset or empty:
// the default of a benchmark command's flag that a test run may set.
func EnvOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
