// Command skipctl is the command-line client of a skiprange overlay: it reads and writes keys,
// scans ranges and prefixes, shows a node's status, walks the ring and drives benchmark workloads,
// all through one entry node over the client protocol (/skiprange/client/1.0.0).
//
// Run 'skipctl help' for the commands, flags, exit codes and examples.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/skiprange/skiprange/client"
)

// Exit codes. They are part of the interface: scripts test them.
const (
	exitOK          = 0 // success
	exitNotFound    = 1 // get/del: key not found; get: key lost; scan/prefix: part of the range lost
	exitUsage       = 2 // bad command line: arguments, flags, malformed multiaddr, key too large
	exitUnreachable = 3 // no answer: peer unreachable, timeout, stream failure
	exitOverlay     = 4 // the overlay answered an error (or another failure)
)

const usageText = `skipctl — command-line client of a skiprange overlay

skiprange is a peer-to-peer key-value store whose nodes each own an arc of an ordered key
space. skipctl talks to one node, the entry point, which routes every request through the
overlay: any live node will do.

Usage:
  skipctl [global flags] <command> [flags] [arguments]

Commands:
  put KEY VALUE        write KEY = VALUE
  get KEY              print the value of KEY
  del KEY              delete KEY
  scan START END       print the items with START <= key < END, in key order
                       (START = END: every key; END "": up to the largest key)
  prefix P             print the items whose key starts with P
  status               describe the entry node: range, state, load, lock, neighbours
  ring                 walk the ring from the entry node: a table of every node, a bar chart
                       of their loads, totals, and whatever looks broken
  bench                drive a workload (pulse, zipf, uniform, hot, dynamic, words) against
                       the entry node and report throughput, latency percentiles, hops and
                       errors
  help [COMMAND]       this text, or the help of one command

Global flags (before or after the command):
  --peer MULTIADDR     the entry node, as printed by the node at start:
                       /ip4/<ip>/tcp/<port>/p2p/<peer-id> (or /udp/<port>/quic-v1);
                       default: $SKIPCTL_PEER
  --json               machine-readable output: exactly one JSON document on stdout, for
                       errors too ({"ok": false, "error": ..., "class": ..., "exit_code": ...})
  --timeout DURATION   limit for each request (default 10s)
  --hex                KEY, VALUE, START, END and P are hexadecimal, and keys and values
                       are printed in hex: for binary keys and values

Keys and values are byte strings, ordered bytewise. An argument that starts with '-' goes
after '--', which ends the flags. Keys may be up to 1 KiB and values up to 64 KiB (the
nodes' default limits; skipctl refuses larger ones before sending).

Exit codes:
  0  success
  1  not found: get or del of an absent key; get of a key in a range lost with a failed
     node; scan or prefix whose range was partly lost (the items printed may be incomplete)
  2  usage error: bad arguments or flags, malformed multiaddr, key or value too large
  3  no answer: the peer is unreachable, the request timed out, or the stream failed
     (reset, protocol not supported); ring: a successor is unreachable
  4  the overlay answered an error (invalid request, routing failure, hop limit);
     ring: the ring is broken; or any other failure

Examples:
  export SKIPCTL_PEER=/ip4/127.0.0.1/tcp/4001/p2p/12D3KooWExample…
  skipctl put apple red
  skipctl get apple                      # prints: red
  skipctl get pear; echo $?              # key not found: 1
  skipctl scan a n --limit 20            # keys in [a, n)
  skipctl scan "" ""                     # every key (the first 100: --limit)
  skipctl prefix app --json | jq '.items[].key'
  skipctl --hex put 00ff 0a0b            # binary key 0x00ff
  skipctl status
  skipctl ring
  skipctl bench --workload zipf --keys 10000 --load --rate 500 --duration 30s

Run 'skipctl help <command>' for the flags and examples of a command.
`

// usageError is the caller's mistake: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func badUsage(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// exitError carries an exit status chosen by a command for an outcome that is not an error of
// the client package (a scan that was incomplete, a broken ring).
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// exitCode maps an error to the documented exit status.
func exitCode(err error) int {
	var ue usageError
	var ee exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue), errors.Is(err, client.ErrBadAddress), errors.Is(err, client.ErrTooLarge):
		return exitUsage
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, client.ErrNotFound), errors.Is(err, client.ErrLost):
		return exitNotFound
	case errors.Is(err, client.ErrUnreachable), errors.Is(err, client.ErrTimeout),
		errors.Is(err, client.ErrProtocol), errors.Is(err, context.Canceled):
		return exitUnreachable
	}
	return exitOverlay
}

// errClass names an error's class for JSON output.
func errClass(err error) string {
	var ue usageError
	var ee exitError
	switch {
	case errors.As(err, &ue):
		return "usage"
	case errors.As(err, &ee):
		return "failed"
	}
	return client.Class(err)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := newApp(os.Stdout, os.Stderr, os.Getenv).run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// app is one invocation of skipctl; its writers, environment and client constructor are
// replaceable for tests.
type app struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	newClient      func(ctx context.Context, timeout time.Duration) (*client.Client, error)
	g              globals
	wroteJSON      bool   // a JSON document is on stdout already
	subject        string // the key a command is about, for messages
}

func newApp(stdout, stderr io.Writer, getenv func(string) string) *app {
	return &app{
		stdout: stdout,
		stderr: stderr,
		getenv: getenv,
		newClient: func(ctx context.Context, timeout time.Duration) (*client.Client, error) {
			return client.New(ctx, client.WithTimeout(timeout))
		},
	}
}

// command is one subcommand: its flags are registered on fs by setup, run does the work.
type command struct {
	name    string
	args    string // argument synopsis
	summary string
	help    string // more text: details and examples
	nargs   int    // exact number of positional arguments
	setup   func(a *app, fs *flag.FlagSet) func(ctx context.Context, args []string) error
}

func commands() []*command {
	return []*command{putCmd(), getCmd(), delCmd(), scanCmd(), prefixCmd(), statusCmd(), ringCmd(), benchCmd()}
}

func findCommand(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return c
		}
	}
	return nil
}

// run executes the command line and returns the exit status.
func (a *app) run(ctx context.Context, args []string) int {
	a.g = globals{peer: a.getenv("SKIPCTL_PEER"), timeout: client.DefaultTimeout}
	top := flag.NewFlagSet("skipctl", flag.ContinueOnError)
	top.SetOutput(io.Discard)
	top.Usage = func() {}
	a.g.register(top)
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(a.stdout, usageText)
			return exitOK
		}
		return a.fail("", badUsage("%v", err))
	}
	rest := top.Args()
	if len(rest) == 0 {
		fmt.Fprint(a.stderr, usageText)
		if a.g.json {
			return a.fail("", badUsage("no command given"))
		}
		return exitUsage
	}
	name, rest := rest[0], rest[1:]
	if name == "help" {
		return a.help(rest)
	}
	cmd := findCommand(name)
	if cmd == nil {
		return a.fail("", badUsage("unknown command %q; the commands are put, get, del, scan, prefix, status, ring, bench (run 'skipctl help')", name))
	}
	fs := flag.NewFlagSet("skipctl "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	a.g.register(fs)
	do := cmd.setup(a, fs)
	pos, err := parseInterspersed(fs, rest)
	if errors.Is(err, flag.ErrHelp) {
		a.commandHelp(cmd)
		return exitOK
	}
	if err != nil {
		return a.fail(name, badUsage("%v", err))
	}
	if len(pos) != cmd.nargs {
		return a.fail(name, badUsage("%s takes %s, got %d argument%s", name, argCount(cmd), len(pos), plural(len(pos))))
	}
	if a.g.timeout <= 0 {
		return a.fail(name, badUsage("--timeout must be positive, got %v", a.g.timeout))
	}
	return a.fail(name, do(ctx, pos))
}

func argCount(c *command) string {
	if c.nargs == 0 {
		return "no arguments"
	}
	return fmt.Sprintf("%d argument%s (%s)", c.nargs, plural(c.nargs), c.args)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// fail reports err (nil: success) and returns its exit status. With --json the report is a JSON
// document on stdout; a human-readable message goes to stderr in every case.
func (a *app) fail(cmd string, err error) int {
	code := exitCode(err)
	if err == nil {
		return code
	}
	prefix := "skipctl"
	if cmd != "" {
		prefix += " " + cmd
	}
	if a.subject != "" {
		prefix += " " + a.subject
	}
	// The command line names the operation and the entry node already: say only what happened.
	msg := err.Error()
	switch e := err.(type) {
	case *client.StatusError:
		msg = e.Reason()
	case *client.TransportError:
		msg = e.Reason()
		switch {
		case e.Err == nil:
		case e.Kind == client.ErrTimeout:
			msg = fmt.Sprintf("%v (--timeout %v): %v", e.Kind, a.g.timeout, e.Err)
		case e.Kind == client.ErrUnreachable:
			msg = fmt.Sprintf("%v (%s): %v", e.Kind, strings.TrimSpace(a.g.peer), e.Err)
		}
	}
	fmt.Fprintf(a.stderr, "%s: %s\n", prefix, msg)
	var ue usageError
	if errors.As(err, &ue) {
		if cmd != "" {
			fmt.Fprintf(a.stderr, "Run 'skipctl help %s' for usage.\n", cmd)
		} else {
			fmt.Fprintln(a.stderr, "Run 'skipctl help' for usage.")
		}
	}
	if a.g.json && !a.wroteJSON {
		a.writeJSON(map[string]any{
			"ok":        false,
			"command":   cmd,
			"error":     err.Error(),
			"class":     errClass(err),
			"exit_code": code,
		})
	}
	return code
}

// help prints the overview or the help of one command.
func (a *app) help(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(a.stdout, usageText)
		return exitOK
	}
	cmd := findCommand(args[0])
	if cmd == nil {
		return a.fail("help", badUsage("unknown command %q", args[0]))
	}
	a.commandHelp(cmd)
	return exitOK
}

func (a *app) commandHelp(cmd *command) {
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	var g globals
	g.timeout = client.DefaultTimeout
	g.register(fs)
	cmd.setup(&app{}, fs)
	synopsis := "skipctl " + cmd.name
	if cmd.args != "" {
		synopsis += " " + cmd.args
	}
	fmt.Fprintf(a.stdout, "%s — %s\n\nUsage:\n  %s [flags]\n\n", synopsis, cmd.summary, synopsis)
	if cmd.help != "" {
		fmt.Fprintf(a.stdout, "%s\n", cmd.help)
	}
	fmt.Fprintln(a.stdout, "Flags:")
	printFlags(a.stdout, fs, func(name string) bool { return !isGlobal(name) })
	fmt.Fprintln(a.stdout, "\nGlobal flags:")
	printFlags(a.stdout, fs, isGlobal)
	fmt.Fprintln(a.stdout, "\nExit codes: 0 ok, 1 not found or lost, 2 usage error, 3 no answer from the peer,\n4 the overlay answered an error. Run 'skipctl help' for the overview.")
}
