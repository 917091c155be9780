// Package node composes one skiprange node: its item store, the skip graph protocol and the
// balancer (and, later, the client service). Runtimes — the simulator and the libp2p host —
// create a Node, feed it messages and timers from one goroutine, and carry out what it asks
// through overlay.Env. Nothing here blocks, starts goroutines or touches the network.
package node

import (
	"github.com/skiprange/skiprange/nixmig"
	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
	"github.com/skiprange/skiprange/skipgraph"
)

// Config gathers the parameters of every protocol component of a node.
type Config struct {
	SkipGraph skipgraph.Config
	Balance   nixmig.Config
}

// DefaultConfig returns the defaults of every component.
func DefaultConfig() Config {
	return Config{SkipGraph: skipgraph.DefaultConfig(), Balance: nixmig.DefaultConfig()}
}

// Node is one node of the overlay: the skip graph node, with its balancer beside it.
type Node struct {
	*skipgraph.Node
	Balancer *nixmig.Balancer
}

// New creates a node with identity id over store.
func New(env overlay.Env, store overlay.Store, id overlay.NodeID, cfg Config) (*Node, error) {
	sg, err := skipgraph.New(env, store, id, cfg.SkipGraph)
	if err != nil {
		return nil, err
	}
	bal, err := nixmig.New(env, sg, cfg.Balance)
	if err != nil {
		return nil, err
	}
	return &Node{Node: sg, Balancer: bal}, nil
}

// Handle dispatches one message to the component that owns it.
func (n *Node) Handle(from overlay.NodeID, m *pb.Envelope) {
	bal, ok := m.Body.(*pb.Envelope_Balance)
	if !ok {
		n.Node.Handle(from, m)
		return
	}
	if err := nixmig.Validate(bal.Balance); err != nil {
		n.Node.Reject(from, err)
		return
	}
	sender, ok := n.Node.Accept(from, m)
	if !ok {
		return
	}
	n.Balancer.Handle(sender, bal.Balance)
}

// HandleTimer dispatches a timer to the component that set it.
func (n *Node) HandleTimer(t overlay.Timer) {
	switch {
	case t.Kind <= skipgraph.LastTimerKind:
		n.Node.HandleTimer(t)
	case t.Kind <= nixmig.LastTimerKind:
		n.Balancer.HandleTimer(t)
	}
}
