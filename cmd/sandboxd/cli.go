package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/api/client"
)

// errToolFailed: the tool's result has is_error; its text is already printed.
var errToolFailed = errors.New("the tool reported an error")

// clientFlags are the flags every client command takes.
type clientFlags struct {
	addr, token, dataDir string
	json                 bool
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "addr", envOr("SANDBOXD_ADDR", "http://127.0.0.1:7788"), "sandboxd address")
	fs.StringVar(&c.token, "token", "", "bearer token (default $SANDBOXD_TOKEN, else DATA_DIR/token)")
	fs.StringVar(&c.dataDir, "data-dir", envOr("SANDBOXD_DATA_DIR", ".data"), "data dir holding the admin token")
	fs.BoolVar(&c.json, "json", false, "print the full answer as JSON (for scripts)")
}

func (c *clientFlags) client() (*client.Client, error) {
	tok := c.token
	if tok == "" {
		tok = os.Getenv("SANDBOXD_TOKEN")
	}
	if tok == "" {
		path := filepath.Join(c.dataDir, api.TokenFileName)
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("no token: %s cannot be read (%v); pass --token, set SANDBOXD_TOKEN, or point --data-dir at the server's data dir", path, err)
		}
		tok = strings.TrimSpace(string(b))
	}
	return client.New(c.addr, tok)
}

// helpRequest is a --help (or -h) that was asked for: run prints its text on
// stdout and exits 0, since asking for help is not a mistake.
type helpRequest struct{ text string }

func (h helpRequest) Error() string { return h.text }

// command is one subcommand's flag set and the line that says how to call it.
type command struct {
	fs    *flag.FlagSet
	usage string // "sandboxd sandbox get ID", without "usage: "
}

func newCommand(name, usage string) *command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse formats errors and help itself
	return &command{fs: fs, usage: usage}
}

// help is the command's usage line and flags, as --help prints them.
func (c *command) help() string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s\n\nflags:\n", c.usage)
	c.fs.SetOutput(&b)
	c.fs.PrintDefaults()
	c.fs.SetOutput(io.Discard)
	return b.String()
}

// bad is the usage error of a command line with the wrong arguments.
func (c *command) bad() error {
	return usagef("usage: %s (sandboxd %s --help lists the flags)", c.usage, c.fs.Name())
}

// parse parses flags that may come before or after positional arguments
// (`sandbox get ID --addr X`), returning the positionals.
func (c *command) parse(args []string) ([]string, error) {
	var pos []string
	for {
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, helpRequest{c.help()}
			}
			return nil, usagef("%s: %v; run `sandboxd %s --help` for its flags", c.fs.Name(), err, c.fs.Name())
		}
		rest := c.fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if rest[0] == "help" && len(pos) == 0 && len(rest) == 1 {
			return nil, helpRequest{c.help()}
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// group is a command with subcommands (sandbox, run, token): the usage it
// prints when asked for help, or when no subcommand is given.
type group struct {
	name  string
	usage string
}

// check handles `sandboxd NAME` (a usage error), `sandboxd NAME --help`,
// `-h` and `help` (its usage, exit 0); ok means args[0] is a subcommand.
func (g group) check(args []string) (ok bool, err error) {
	if len(args) == 0 {
		return false, usagef("%s needs a subcommand:\n%s", g.name, g.usage)
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		return false, helpRequest{g.usage}
	}
	return true, nil
}

func (g group) unknown(sub string) error {
	return usagef("%s %q is not a subcommand; these are:\n%s", g.name, sub, g.usage)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// firstSentence keeps a tool listing to one line per tool; --json shows all.
func firstSentence(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}
