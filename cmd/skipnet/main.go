// Command skipnet runs local networks of real skiprange nodes in one process (each with its own
// libp2p host on 127.0.0.1): `skipnet up` keeps one running for skipctl, and `skipnet demo`
// shows NIXMIG balancing a skewed load as it happens. `skipnet help` explains both.
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

	"github.com/libp2p/go-libp2p/core/peer"
	"go.uber.org/zap"

	"github.com/skiprange/skiprange/testnet/local"
)

const usage = `skipnet — local networks of real skiprange nodes in one process

Usage:
  skipnet up   [--nodes N] [--data-dir DIR] [--fast]   start N nodes and keep them running
  skipnet demo [flags]                                 watch NIXMIG balance a 5% pulse live
  skipnet compose [--nodes N] [--dir DIR]             write a docker-compose testnet (make testnet-up)
  skipnet help [up|demo|compose]

Each node has its own libp2p host on 127.0.0.1, its own store and its own event loop, exactly as
a skipnode daemon. "up" prints every node's address; point skipctl at any of them:

  skipnet up --nodes 8 &
  export SKIPCTL_PEER=<an address skipnet printed>
  skipctl put hello world && skipctl get hello && skipctl ring

"demo" starts a network with balancing held, loads integer keys, reads a pulse over 5% of them
until the nodes that own it are overloaded, then lets NIXMIG work and draws the load of every
node, in ring order, twice a second, until every node is under thres.

Exit status: 0 done, 1 failure, 2 usage error.
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "--help" || args[0] == "-h" {
		if len(args) > 1 {
			args = []string{args[1], "--help"}
		} else {
			fmt.Fprint(stdout, usage)
			return 0
		}
	}
	var err error
	switch args[0] {
	case "up":
		err = up(args[1:], stdout, stderr)
	case "demo":
		err = demo(args[1:], stdout, stderr)
	case "compose":
		err = compose(args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "skipnet: unknown command %q (want up, demo or compose; see skipnet help)\n", args[0])
		return 2
	}
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "skipnet: %v\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "skipnet: %v\n", err)
		return 1
	}
}

type usageError struct{ error }

// parse parses a subcommand's flags; help goes to stdout.
func parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "Usage of skipnet %s:\n", fs.Name())
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(stderr)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}

// up starts a network and keeps it running until a signal.
func up(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	nodes := fs.Int("nodes", 8, "number of nodes")
	dataDir := fs.String("data-dir", "", "keep each node's identity and Pebble store under DIR/node-NNN (default: in memory)")
	fast := fs.Bool("fast", false, "test timings: failures detected within a second, a 4 s load window")
	verbose := fs.Bool("v", false, "log the nodes' protocol events")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if *nodes < 1 {
		return usageError{fmt.Errorf("--nodes must be at least 1")}
	}
	opts := local.Options{DataDir: *dataDir}
	if *fast {
		c := local.FastConfig()
		opts.Node = &c
	}
	if *verbose {
		log, _ := zap.NewDevelopment()
		opts.Logger = log
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stderr, "starting %d nodes…\n", *nodes)
	nw, err := local.Start(ctx, *nodes, opts)
	if err != nil {
		return err
	}
	defer nw.Close()
	for i, r := range nw.Running() {
		fmt.Fprintf(stdout, "node %d  %s\n", i, p2pAddr(r.AddrInfo()))
	}
	first := nw.Running()[0].AddrInfo()
	fmt.Fprintf(stdout, "\nexport SKIPCTL_PEER=%s\nrunning; Ctrl-C stops every node\n", p2pAddr(first))
	<-ctx.Done()
	fmt.Fprintln(stderr, "stopping")
	return nil
}

// p2pAddr returns the first address of ai with its /p2p/ part: what skipctl --peer takes.
func p2pAddr(ai peer.AddrInfo) string {
	addrs, err := peer.AddrInfoToP2pAddrs(&ai)
	if err != nil || len(addrs) == 0 {
		return ai.ID.String()
	}
	return addrs[0].String()
}

// demo runs the live balancing demo.
func demo(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	p := local.PulseParams{}
	fs.IntVar(&p.Nodes, "nodes", 16, "number of nodes")
	fs.IntVar(&p.Keys, "keys", 4000, "integer keys loaded before the pulse")
	fs.Float64Var(&p.Width, "width", 0.05, "pulse width: the fraction of the keys all reads go to")
	fs.Float64Var(&p.Rate, "rate", 400, "reads per second")
	fs.Float64Var(&p.Thres, "thres", 50, "load (reads/s) above which a node is overloaded")
	fs.DurationVar(&p.Limit, "limit", time.Minute, "give up balancing after this long")
	stay := fs.Bool("stay", false, "keep the network (and the reads) running after the demo, for skipctl, until Ctrl-C")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	switch {
	case p.Nodes < 2:
		return usageError{fmt.Errorf("--nodes must be at least 2")}
	case p.Keys < p.Nodes:
		return usageError{fmt.Errorf("--keys must be at least --nodes")}
	case !(p.Width > 0 && p.Width <= 1):
		return usageError{fmt.Errorf("--width must lie in (0, 1]")}
	case !(p.Rate > 0) || !(p.Thres > 0):
		return usageError{fmt.Errorf("--rate and --thres must be positive")}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stdout, "starting %d nodes on 127.0.0.1 and loading %d keys…\n", p.Nodes, p.Keys)
	run, err := local.NewPulseRun(ctx, p)
	if err != nil {
		return err
	}
	defer run.Close()
	fmt.Fprintf(stdout, "entry node: %s\n\n", p2pAddr(run.Net.Running()[0].AddrInfo()))
	fmt.Fprintf(stdout, "reading a %.0f%% pulse at %.0f reads/s; balancing held for one load window (%v)\n", p.Width*100, p.Rate, run.Window())
	fmt.Fprintf(stdout, "each column is a node in ring order; height is its load, %s is thres, %s is twice thres or more\n\n", string(levels[len(levels)/2-1]), string(levels[len(levels)-1]))
	fmt.Fprintf(stdout, "%7s  %-*s  %9s  %4s  %4s  %4s  %6s\n", "time", p.Nodes, "loads", "max/thres", "over", "NIX", "MIG", "moved")
	run.StartReads(ctx)
	var watch local.BalanceWatch
	show := func(t time.Duration) (balanceSince time.Duration, balanced bool) {
		ring := run.Ring(ctx)
		maxLoad := 0.0
		var strip strings.Builder
		over := 0
		for _, nl := range ring {
			strip.WriteRune(level(nl.Load, p.Thres))
			maxLoad = max(maxLoad, nl.Load)
			if nl.Load > p.Thres {
				over++
			}
		}
		moved, nix, mig := run.Moves(ctx)
		fmt.Fprintf(stdout, "%6.1fs  %-*s  %9.2f  %4d  %4d  %4d  %6d\n", t.Seconds(), p.Nodes, strip.String(), maxLoad/p.Thres, over, nix, mig, moved)
		return watch.Observe(t, ring, p.Thres)
	}
	hold := run.Window() + run.Window()/4
	for t := -hold; t < 0; t += 500 * time.Millisecond {
		if sleep(ctx, 500*time.Millisecond) != nil {
			return nil
		}
		show(t)
	}
	fmt.Fprintln(stdout, "        --- NIXMIG starts ---")
	if err := run.StartBalancing(ctx); err != nil {
		return err
	}
	watch = local.BalanceWatch{} // the reads before balancing do not count
	begin := time.Now()
	balancedAt := time.Duration(-1)
	for time.Since(begin) < p.Limit {
		if sleep(ctx, 500*time.Millisecond) != nil {
			return nil
		}
		since, ok := show(time.Since(begin))
		balancedAt = -1
		if ok {
			balancedAt = since
		}
		if balancedAt >= 0 && time.Since(begin) > balancedAt+2*time.Second {
			break
		}
	}
	res := run.Finish(ctx)
	fmt.Fprintln(stdout)
	if balancedAt >= 0 {
		fmt.Fprintf(stdout, "every node under thres %.0f after %.1f s of balancing: %d NIX exchanges, %d migrations, %d items moved\n",
			p.Thres, balancedAt.Seconds(), res.NIX, res.MIG, res.ItemsMoved)
	} else {
		fmt.Fprintf(stdout, "NOT balanced within %v: max load %.1f, thres %.0f\n", p.Limit, res.MaxLoadAfter, p.Thres)
	}
	fmt.Fprintf(stdout, "%d reads: %d failed, %d wrong answers\n", res.Reads, res.FailedReads, res.WrongAnswers)
	if *stay {
		fmt.Fprintf(stdout, "\nnetwork still up (reads stopped): export SKIPCTL_PEER=%s; skipctl ring\nCtrl-C stops it\n", p2pAddr(run.Net.Running()[0].AddrInfo()))
		<-ctx.Done()
	}
	if balancedAt < 0 || res.WrongAnswers > 0 {
		return fmt.Errorf("the demo did not balance cleanly")
	}
	return nil
}

// levels draw a load: the middle one is thres.
var levels = []rune("▁▂▃▄▅▆▇█")

func level(load, thres float64) rune {
	i := int(load / thres * float64(len(levels)/2))
	if load > thres && i < len(levels)/2 {
		i = len(levels) / 2
	}
	return levels[min(max(i, 0), len(levels)-1)]
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
