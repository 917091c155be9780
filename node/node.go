// Package node composes one skiprange node: its item store, the skip graph protocol and (later)
// the balancer and client service. Runtimes — the simulator and the libp2p host — create a Node,
// feed it messages and timers from one goroutine, and carry out what it asks through overlay.Env.
// Nothing here blocks, starts goroutines or touches the network.
package node

import (
	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
	"github.com/skiprange/skiprange/skipgraph"
)

// Config gathers the parameters of every protocol component of a node.
type Config struct {
	SkipGraph skipgraph.Config
}

// DefaultConfig returns the defaults of every component.
func DefaultConfig() Config {
	return Config{SkipGraph: skipgraph.DefaultConfig()}
}

// Node is one node of the overlay.
type Node struct {
	*skipgraph.Node
}

// New creates a node with identity id over store.
func New(env overlay.Env, store overlay.Store, id overlay.NodeID, cfg Config) (*Node, error) {
	sg, err := skipgraph.New(env, store, id, cfg.SkipGraph)
	if err != nil {
		return nil, err
	}
	return &Node{Node: sg}, nil
}

// Handle dispatches one message to the component that owns it.
func (n *Node) Handle(from overlay.NodeID, m *pb.Envelope) {
	n.Node.Handle(from, m)
}

// HandleTimer dispatches a timer to the component that set it.
func (n *Node) HandleTimer(t overlay.Timer) {
	if t.Kind <= skipgraph.LastTimerKind {
		n.Node.HandleTimer(t)
	}
}
