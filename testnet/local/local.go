// Package local runs a network of real skiprange nodes in one process: each node has its own
// libp2p host on 127.0.0.1, its own store and its own event loop, exactly as a skipnode daemon
// would. Tests, benchmarks and the demo use it.
package local

import (
	"context"
	"crypto/rand"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/skiprange/skiprange/node"
	"github.com/skiprange/skiprange/node/store"
	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/p2p"
)

// Options shape a local network.
type Options struct {
	// Node is every node's protocol configuration (p2p.DefaultNodeConfig when zero).
	Node *node.Config
	// DataDir, when set, gives each node a Pebble store and an identity under DataDir/node-<i>,
	// so that nodes can be restarted; otherwise nodes keep their items in memory.
	DataDir string
	Logger  *zap.Logger
	// Metrics: give each node its own Prometheus registry.
	Metrics bool
	// OnEvent sees every node's protocol events (on that node's goroutine).
	OnEvent func(i int, e overlay.Event)
	// JoinTimeout bounds how long Add waits for a node to own its first range.
	JoinTimeout time.Duration
	// Network, when set, is advertised on the DHT by every node (rendezvous).
	Network string
	// RingCheck is p2p.Config.RingCheck: how often a node cross-checks a peer found on the DHT.
	RingCheck time.Duration
	// HoldBalancing: nodes do not balance until their runtimes' StartBalancing.
	HoldBalancing bool
	// JoinAt, when set, gives the key node i joins next to (by default a random key). Tests
	// whose keys fill a small part of the circle place joins among them.
	JoinAt func(i int) overlay.Key
}

// FastConfig returns protocol parameters for tests and demos on one machine: failures are
// detected within about a second and a balancing load window lasts seconds, not minutes.
func FastConfig() node.Config {
	c := p2p.DefaultNodeConfig()
	sg := &c.SkipGraph
	sg.ProbeInterval = 250 * time.Millisecond
	sg.ProbeTimeout = 250 * time.Millisecond
	sg.ProbeMisses = 3
	sg.RefreshInterval = 2 * time.Second
	sg.RequestTimeout = 2 * time.Second
	sg.JoinTimeout = 3 * time.Second
	sg.JoinBackoff = 100 * time.Millisecond
	sg.HandoffLease = 5 * time.Second
	sg.HandoffRetry = 500 * time.Millisecond
	sg.Linger = 5 * time.Second
	b := &c.Balance
	b.Window = 4 * time.Second
	b.Slots = 8
	b.CheckInterval = 250 * time.Millisecond
	b.Lease = 3 * time.Second
	b.HopTime = 20 * time.Millisecond
	b.IBInterval = time.Second
	b.DirectionHalfLife = 5 * time.Second
	return c
}

// Member is one node of the network and what it needs to be restarted.
type Member struct {
	Index    int
	Runtime  *p2p.Runtime // nil while stopped
	Identity crypto.PrivKey
	Registry *prometheus.Registry
	Dir      string
	store    overlay.Store
	joined   chan struct{}
	joinOnce *sync.Once
}

// Network is a set of local nodes.
type Network struct {
	opts    Options
	mu      sync.Mutex
	members []*Member
	cut     cut
}

// Start starts n nodes: the first starts the overlay, the others join it one after the other
// through a random running node.
func Start(ctx context.Context, n int, opts Options) (*Network, error) {
	if opts.Node == nil {
		c := p2p.DefaultNodeConfig()
		opts.Node = &c
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.JoinTimeout <= 0 {
		opts.JoinTimeout = 30 * time.Second
	}
	nw := &Network{opts: opts}
	for i := 0; i < n; i++ {
		if _, err := nw.Add(ctx); err != nil {
			nw.Close()
			return nil, fmt.Errorf("node %d: %w", i, err)
		}
	}
	return nw, nil
}

// Members returns the network's nodes, stopped ones included, in order of creation.
func (nw *Network) Members() []*Member {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return append([]*Member(nil), nw.members...)
}

// Running returns the runtimes of the nodes that are running.
func (nw *Network) Running() []*p2p.Runtime {
	var out []*p2p.Runtime
	for _, m := range nw.Members() {
		if m.Runtime != nil {
			out = append(out, m.Runtime)
		}
	}
	return out
}

// Add starts a new node (the first one starts the overlay) and waits until it owns a range.
func (nw *Network) Add(ctx context.Context) (*Member, error) {
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, err
	}
	nw.mu.Lock()
	m := &Member{Index: len(nw.members), Identity: key}
	nw.mu.Unlock()
	if nw.opts.DataDir != "" {
		m.Dir = filepath.Join(nw.opts.DataDir, fmt.Sprintf("node-%03d", m.Index))
	}
	if err := nw.run(ctx, m); err != nil {
		return nil, err
	}
	nw.mu.Lock()
	nw.members = append(nw.members, m)
	nw.mu.Unlock()
	return m, nil
}

// run starts m's runtime (anew or over its data directory) and waits until it owns a range.
func (nw *Network) run(ctx context.Context, m *Member) error {
	if m.Dir != "" {
		st, err := store.OpenPebble(filepath.Join(m.Dir, "store"), nw.opts.Logger)
		if err != nil {
			return err
		}
		m.store = st
	} else {
		m.store = store.NewMemory()
	}
	m.joined, m.joinOnce = make(chan struct{}), &sync.Once{}
	joined, once := m.joined, m.joinOnce
	self, err := peer.IDFromPrivateKey(m.Identity)
	if err != nil {
		return err
	}
	cfg := p2p.Config{
		Gater:         gater{self: self, cut: &nw.cut},
		Identity:      m.Identity,
		ListenAddrs:   []string{"/ip4/127.0.0.1/tcp/0"},
		Node:          *nw.opts.Node,
		HoldBalancing: nw.opts.HoldBalancing,
		Network:       nw.opts.Network,
		RingCheck:     nw.opts.RingCheck,
		Store:         m.store,
		Logger:        nw.opts.Logger.With(zap.Int("i", m.Index)),
		OnEvent: func(e overlay.Event) {
			if e.Kind == overlay.EventJoined {
				once.Do(func() { close(joined) })
			}
			if nw.opts.OnEvent != nil {
				nw.opts.OnEvent(m.Index, e)
			}
		},
	}
	if nw.opts.Metrics {
		m.Registry = prometheus.NewRegistry()
		cfg.Registerer = m.Registry
	}
	if nw.opts.JoinAt != nil {
		k := nw.opts.JoinAt(m.Index)
		cfg.JoinAt = &k
	}
	running := nw.Running()
	if len(running) == 0 {
		cfg.NewNetwork = true
	} else {
		// Two introducers: the join goes on through the second if the first fails.
		for _, i := range randomPick(len(running), 2) {
			cfg.Bootstrap = append(cfg.Bootstrap, running[i].AddrInfo())
		}
	}
	rt, err := p2p.Start(ctx, cfg)
	if err != nil {
		_ = m.store.Close()
		return err
	}
	m.Runtime = rt
	select {
	case <-joined:
		return nil
	case <-time.After(nw.opts.JoinTimeout):
	case <-ctx.Done():
	}
	rt.Close()
	m.Runtime = nil
	_ = m.store.Close()
	return fmt.Errorf("node %d did not join within %v", m.Index, nw.opts.JoinTimeout)
}

func randomPick(n, k int) []int {
	var b [8]byte
	_, _ = rand.Read(b[:])
	first := int(uint64(b[0])|uint64(b[1])<<8|uint64(b[2])<<16) % n
	out := []int{first}
	if k > 1 && n > 1 {
		out = append(out, (first+1+int(b[3])%(n-1))%n)
	}
	return out
}

// Leave has node i hand its range over and stop.
func (nw *Network) Leave(ctx context.Context, i int) error {
	m := nw.Members()[i]
	if m.Runtime == nil {
		return fmt.Errorf("node %d is not running", i)
	}
	err := m.Runtime.Leave(ctx)
	m.Runtime = nil
	_ = m.store.Close()
	return err
}

// Crash stops node i at once, without a word to its neighbours.
func (nw *Network) Crash(i int) {
	m := nw.Members()[i]
	if m.Runtime == nil {
		return
	}
	m.Runtime.Close()
	m.Runtime = nil
	_ = m.store.Close()
}

// Restart starts node i again over its data directory (it needs DataDir): same identity, items
// and range.
func (nw *Network) Restart(ctx context.Context, i int) error {
	m := nw.Members()[i]
	if m.Dir == "" {
		return fmt.Errorf("node %d keeps no data directory to restart from", i)
	}
	if m.Runtime != nil {
		nw.Crash(i)
	}
	return nw.run(ctx, m)
}

// Entry returns the address of a running node, for clients.
func (nw *Network) Entry() (peer.AddrInfo, error) {
	r := nw.Running()
	if len(r) == 0 {
		return peer.AddrInfo{}, fmt.Errorf("no node is running")
	}
	return r[0].AddrInfo(), nil
}

// Close stops every node.
func (nw *Network) Close() {
	for i, m := range nw.Members() {
		if m.Runtime != nil {
			nw.Crash(i)
		}
	}
}
