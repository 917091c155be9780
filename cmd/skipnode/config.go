package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/skiprange/skiprange/nixmig"
	"github.com/skiprange/skiprange/node"
	"github.com/skiprange/skiprange/overlay/p2p"
)

// options are the daemon's settings, from flags, SKIPNODE_* environment variables and an
// optional config file, in that order of precedence.
type options struct {
	listen      list
	bootstrap   list
	peers       []peer.AddrInfo // bootstrap, parsed
	network     string
	dataDir     string
	identity    string
	newNetwork  bool
	joinAt      string
	metricsAddr string
	logLevel    string
	libp2pLog   string
	logJSON     bool
	leaveWait   time.Duration
	ringCheck   time.Duration
	algorithm   string
	node        node.Config
}

// list is a flag that may be repeated or given comma-separated.
type list []string

func (l *list) String() string { return strings.Join(*l, ",") }

func (l *list) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

const usageHead = `skipnode — a skiprange peer: joins (or starts) an overlay, stores its range of keys durably,
serves queries, and balances load with NIXMIG.

Usage:
  skipnode [flags]

Start a new network, then join a second node to it:
  skipnode --new-network --data-dir ./n1 --listen /ip4/127.0.0.1/tcp/4001
  skipnode --data-dir ./n2 --listen /ip4/127.0.0.1/tcp/4002 \
           --bootstrap /ip4/127.0.0.1/tcp/4001/p2p/<peer id printed by the first node>

A node restarted over the same --data-dir comes back with its identity, items and range.
SIGINT/SIGTERM hands the node's range to a neighbour, then exits; a second signal exits at once.

Every flag can also be set by an environment variable SKIPNODE_<FLAG> (e.g. SKIPNODE_DATA_DIR)
or by a line "flag = value" in the file given by --config; flags win over the environment, which
wins over the file.

Flags:
`

// newFlags registers every flag on fs, with defaults from p2p.DefaultNodeConfig.
func newFlags(fs *flag.FlagSet, o *options) *string {
	o.node = p2p.DefaultNodeConfig()
	b := &o.node.Balance
	configFile := fs.String("config", "", "read settings from this file (lines of `flag = value`, # comments)")
	fs.Var(&o.listen, "listen", "multiaddr(s) to listen on, repeatable or comma-separated (default /ip4/0.0.0.0/tcp/4001 and /ip4/0.0.0.0/udp/4001/quic-v1)")
	fs.Var(&o.bootstrap, "bootstrap", "multiaddr(s) with /p2p/<id> of nodes to join through, repeatable or comma-separated")
	fs.StringVar(&o.network, "network", "skiprange", "network name: nodes advertise it on the DHT and find introducers through it")
	fs.StringVar(&o.dataDir, "data-dir", "skipnode-data", "directory for the identity key and the item store")
	fs.StringVar(&o.identity, "identity", "", "the node's private key file, created if missing (default <data-dir>/identity.key); a testnet generator writes them beforehand so that peer IDs are known")
	fs.BoolVar(&o.newNetwork, "new-network", false, "start a new overlay when there is no saved state and no --bootstrap peer answers as a member of one (a seed node; peers still joining do not count); a data directory that was a member before joins its --bootstrap peers instead, retrying")
	fs.StringVar(&o.joinAt, "join-at", "", "join next to the owner of this key (default: a random key)")
	fs.StringVar(&o.metricsAddr, "metrics", "127.0.0.1:9100", "address for /metrics (Prometheus) and /healthz; empty disables")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&o.libp2pLog, "libp2p-log-level", "error", "log level of libp2p's own loggers")
	fs.BoolVar(&o.logJSON, "log-json", false, "log JSON lines instead of console text")
	fs.DurationVar(&o.leaveWait, "leave-timeout", time.Minute, "how long a graceful leave may take before the node exits anyway")
	fs.DurationVar(&o.ringCheck, "ring-check", 10*time.Minute, "how often, on average, the node asks a peer found on the DHT under --network to look for it: two rings that formed apart (a cut longer than a day, or two seeds started apart) merge through it; 0 turns it off")
	sg := &o.node.SkipGraph
	fs.DurationVar(&sg.ProbeInterval, "probe-interval", sg.ProbeInterval, "how often a node pings its ring neighbours; failure detection takes about probe-misses × this")
	fs.DurationVar(&sg.ProbeTimeout, "probe-timeout", sg.ProbeTimeout, "how long a ping waits for its answer")
	fs.IntVar(&sg.ProbeMisses, "probe-misses", sg.ProbeMisses, "unanswered pings in a row that make a neighbour dead")
	fs.DurationVar(&sg.TombstoneTTL, "tombstone-ttl", sg.TombstoneTTL, "how long a delete made in a range taken over from a failed node (or in a piece just handed off) is remembered: a node away longer than this (a long partition, a restart after days) brings such deleted keys back")
	fs.IntVar(&sg.MaxTombstones, "max-tombstones", sg.MaxTombstones, "most such deletes a node remembers (the oldest go first); each is kept in the node's saved state")
	fs.StringVar(&o.algorithm, "algorithm", b.Algorithm.String(), "balancing: nixmig, nix, mig, ib (Item Balancing), threshold (Ganesan et al.'s threshold algorithm) or none")
	fs.Float64Var(&b.Thres, "thres", b.Thres, "load above which a node is overloaded (requests per load window)")
	fs.Float64Var(&b.OverThres, "over-thres", b.OverThres, "load above which only the share --a of the excess moves in one exchange")
	fs.Float64Var(&b.A, "a", b.A, "share of the excess moved per exchange above --over-thres, in (0, 1]")
	fs.IntVar(&b.TTL, "ttl", b.TTL, "most nodes a local wave reserves, 1 to 63 (a wave whose members can all give first may reserve 4·ttl, at most 63)")
	fs.IntVar(&b.TTLMax, "ttl-max", b.TTLMax, "the largest ttl a node's waves grow to, doubling from --ttl with each wave that way that ran out of reach (its last node still over keep) and halving with each that did not; 0 to 63, at or under --ttl a fixed ttl")
	fs.Float64Var(&b.Headroom, "headroom", b.Headroom, "share of --thres the nodes of a balancing wave try to keep free, in [0, 1); a node whose loaded keys carry over twice that each keeps none")
	fs.DurationVar(&b.Window, "window", b.Window, "load window: load counts the requests served in this sliding window")
	fs.IntVar(&b.Slots, "slots", b.Slots, "resolution of the load window (slots per window)")
	fs.DurationVar(&b.CheckInterval, "check-interval", b.CheckInterval, "how often an idle node compares its load with --thres")
	fs.DurationVar(&b.Lease, "lease", b.Lease, "balancing lock lease (the shortest: a wave's locks get at least 8 hop times for each node its ttl allows)")
	return configFile
}

// loadOptions parses args over the environment and the config file.
func loadOptions(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("skipnode", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageHead)
		fs.PrintDefaults()
	}
	configFile := newFlags(fs, o)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (skipnode takes flags only; see --help)", fs.Arg(0))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	// The environment fills what flags did not set; the file fills what neither did. A flag
	// that repeats (a list) must not accumulate across sources: only the first source counts.
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || f.Name == "config" || envErr != nil {
			return
		}
		env := "SKIPNODE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("%s=%q: %w", env, v, err)
			}
			given[f.Name] = true
		}
	})
	if envErr != nil {
		return nil, envErr
	}
	if *configFile == "" {
		*configFile = os.Getenv("SKIPNODE_CONFIG")
	}
	if *configFile != "" {
		if err := applyFile(fs, *configFile, given); err != nil {
			return nil, err
		}
	}
	if err := o.finish(); err != nil {
		return nil, err
	}
	return o, nil
}

// applyFile sets, from a config file, the flags no flag or variable has set.
func applyFile(fs *flag.FlagSet, path string, given map[string]bool) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		name, value, ok := strings.Cut(text, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" {
			return fmt.Errorf("%s:%d: want `flag = value`, got %q", path, line, text)
		}
		if fs.Lookup(name) == nil || name == "config" {
			return fmt.Errorf("%s:%d: unknown setting %q (settings are the flags of skipnode --help)", path, line, name)
		}
		if given[name] {
			continue
		}
		if err := fs.Set(name, value); err != nil {
			return fmt.Errorf("%s:%d: %s: %w", path, line, name, err)
		}
	}
	return sc.Err()
}

// finish checks the settings as a whole.
func (o *options) finish() error {
	if o.ringCheck < 0 {
		return fmt.Errorf("--ring-check %s: want a positive duration, or 0 to turn the ring checks off", o.ringCheck)
	}
	alg, err := nixmig.ParseAlgorithm(o.algorithm)
	if err != nil {
		return err
	}
	o.node.Balance.Algorithm = alg
	if err := o.node.Balance.Validate(); err != nil {
		return fmt.Errorf("balancing settings: %w", err)
	}
	if err := o.node.SkipGraph.Validate(); err != nil {
		return fmt.Errorf("overlay settings: %w", err)
	}
	if o.dataDir == "" {
		return errors.New("--data-dir must not be empty: the node keeps its identity and items there")
	}
	if o.identity == "" {
		o.identity = filepath.Join(o.dataDir, "identity.key")
	}
	if len(o.listen) == 0 {
		o.listen = list{"/ip4/0.0.0.0/tcp/4001", "/ip4/0.0.0.0/udp/4001/quic-v1"}
	}
	for _, s := range o.listen {
		if _, err := ma.NewMultiaddr(s); err != nil {
			return fmt.Errorf("--listen %q: want a multiaddr such as /ip4/0.0.0.0/tcp/4001: %w", s, err)
		}
	}
	for _, s := range o.bootstrap {
		ai, err := peer.AddrInfoFromString(s)
		if err != nil {
			return fmt.Errorf("--bootstrap %q: want a multiaddr ending in /p2p/<peer id>, as a node prints at start: %w", s, err)
		}
		o.peers = append(o.peers, *ai)
	}
	return nil
}
