package main

import "github.com/sandboxd/sandboxd/agent/jail"

// runJail confines a program on the host (package jail): sandboxd runs
// host kernels this way.
func runJail(args []string) int { return jail.Main(args) }
