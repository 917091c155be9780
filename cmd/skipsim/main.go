// Command skipsim runs the skiprange protocol in the deterministic simulator: the same node code
// as the real daemon, thousands of nodes in one process, virtual time, seeded randomness.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

const usage = `skipsim — deterministic simulator for the skiprange overlay

Usage:
  skipsim <command> [flags]

Commands:
  overlay     build a circular skip graph by joins, load keys, run checked lookups and scans,
              optionally make nodes leave or crash, and report hops, messages and repair time
  balance     one load-balancing run (NIXMIG or a baseline) under a query workload: completion
              time, messages, items moved, Gini before and after, invariant checks
  experiment  a named series of balancing runs over seeds (the thesis's tables and figures):
              a Markdown table on stdout, CSV and SVG files in --out

Run 'skipsim <command> --help' for the flags of a command.
The same seed gives the same run. Exit status: 0 success, 1 a wrong answer or a broken
invariant, 2 bad usage.
`

// usageError is the caller's mistake (bad flags): exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func badUsage(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// errFailed reports a run that completed but saw wrong answers or broken invariants.
var errFailed = errors.New("the run saw wrong answers or broken invariants (see the summary)")

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	var err error
	switch args[0] {
	case "overlay":
		err = runOverlay(args[1:], stdout, stderr)
	case "balance":
		err = runBalance(args[1:], stdout, stderr)
	case "experiment":
		err = runExperiment(args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "skipsim: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "skipsim %s: %v\nRun 'skipsim %s --help' for usage.\n", args[0], err, args[0])
		return 2
	default:
		fmt.Fprintf(stderr, "skipsim %s: %v\n", args[0], err)
		return 1
	}
}
