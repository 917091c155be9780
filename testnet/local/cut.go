package local

import (
	"sync"

	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// cut is the partition a local network's nodes run under: while one is in effect, connections
// between nodes on different sides are refused, as a network cut would refuse them. Peers it
// does not place (clients) pass.
type cut struct {
	mu   sync.RWMutex
	side map[peer.ID]int
}

// apart reports whether a and b are on different sides of the cut.
func (c *cut) apart(a, b peer.ID) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	sa, okA := c.side[a]
	sb, okB := c.side[b]
	return okA && okB && sa != sb
}

// gater is one node's view of the cut, a libp2p connection gater.
type gater struct {
	self peer.ID
	cut  *cut
}

func (g gater) InterceptPeerDial(p peer.ID) bool                 { return !g.cut.apart(g.self, p) }
func (g gater) InterceptAddrDial(p peer.ID, _ ma.Multiaddr) bool { return !g.cut.apart(g.self, p) }
func (g gater) InterceptAccept(network.ConnMultiaddrs) bool      { return true }
func (g gater) InterceptSecured(_ network.Direction, p peer.ID, _ network.ConnMultiaddrs) bool {
	return !g.cut.apart(g.self, p)
}
func (g gater) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) { return true, 0 }

// Partition cuts the network: node i goes to side sides[i] (nodes not named stay on side 0).
// Connections across the cut close, and new ones are refused until Heal.
func (nw *Network) Partition(sides map[int]int) error {
	side := map[peer.ID]int{}
	for _, m := range nw.Members() {
		id, err := peer.IDFromPrivateKey(m.Identity)
		if err != nil {
			return err
		}
		side[id] = sides[m.Index]
	}
	nw.cut.mu.Lock()
	nw.cut.side = side
	nw.cut.mu.Unlock()
	for _, r := range nw.Running() {
		for _, c := range r.Host().Network().Conns() {
			if nw.cut.apart(r.ID(), c.RemotePeer()) {
				_ = c.Close()
			}
		}
	}
	return nil
}

// Heal ends the partition.
func (nw *Network) Heal() {
	nw.cut.mu.Lock()
	nw.cut.side = nil
	nw.cut.mu.Unlock()
}
