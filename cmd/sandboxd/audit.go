package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/sandboxd/sandboxd/audit"
)

var auditGroup = group{name: "audit", usage: `usage:
  sandboxd audit verify DIR [--json]

Checks the audit record in DIR (DATA_DIR/audit): every record's seq and the
hash of the record before it. Says in one sentence that the chain is whole,
or names the first record that was changed, removed or reordered (file,
line, seq). Exit status 0 when whole, 1 when not. Takes --help for its flags.
`}

// errChainBroken: the sentence naming the break is already printed.
var errChainBroken = errors.New("the audit chain is not whole")

// runAudit checks audit files locally; it talks to no daemon.
func runAudit(args []string, stdout io.Writer) error {
	if ok, err := auditGroup.check(args); !ok {
		return err
	}
	if args[0] != "verify" {
		return auditGroup.unknown(args[0])
	}
	cmd := newCommand("audit verify", "sandboxd audit verify DIR [--json]")
	var asJSON bool
	cmd.fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	pos, err := cmd.parse(args[1:])
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return cmd.bad()
	}
	rep, err := audit.Verify(pos[0])
	if err != nil {
		return err
	}
	if asJSON {
		if err := printJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "%s: %s\n", pos[0], rep.Sentence())
	}
	if rep.Break != nil {
		return errChainBroken
	}
	return nil
}
