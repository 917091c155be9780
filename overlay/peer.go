package overlay

import (
	"crypto/sha256"
	"encoding/binary"
	"math/bits"

	"github.com/skiprange/skiprange/overlay/pb"
)

// NodeID names a node. Under libp2p it is the peer ID's bytes; in the simulator a short label.
type NodeID string

// MVec is a node's membership vector: 64 random bits, read from the most significant bit. The
// level-ℓ ring holds the nodes whose vectors share their first ℓ bits.
type MVec uint64

// MaxLevel bounds the skip graph's height: a membership vector has no more bits.
const MaxLevel = 64

// MVecFor derives the membership vector from a node's identity, so that it survives restarts and
// migrations.
func MVecFor(id NodeID) MVec {
	sum := sha256.Sum256([]byte(id))
	return MVec(binary.BigEndian.Uint64(sum[:8]))
}

// CommonPrefix returns how many leading bits a and b share (64 when equal).
func CommonPrefix(a, b MVec) int {
	return bits.LeadingZeros64(uint64(a ^ b))
}

// SameRing reports whether a and b meet on the level-ℓ ring.
func SameRing(a, b MVec, level int) bool {
	return CommonPrefix(a, b) >= level
}

// Peer describes a node as others know it: identity, the start of its range, the version of that
// start (raised at every handoff that moves it, so fresher news wins), its membership vector, its
// incarnation (drawn anew when a node starts without its old state, so that its neighbours can
// tell it from the node they linked to) and, under libp2p, its listen addresses.
//
// Start is set by PeerFromPB or WithStart only, never assigned: both keep the cached prefix and
// wire form that go with it.
type Peer struct {
	ID          NodeID
	Start       Key
	Version     uint64
	MVec        MVec
	Incarnation uint64
	Addrs       [][]byte

	// wire is the descriptor this Peer was read from (or last encoded to): sent messages are
	// never modified, so it can be sent again as is instead of being rebuilt.
	wire *pb.NodeRef
	// startPrefix is KeyUint64(Start), or 0 when not computed: routing compares the starts of
	// every link on every hop, and reading each start's bytes was a cache miss each.
	startPrefix uint64
}

// WithStart returns p with a new start and version.
func (p Peer) WithStart(start Key, version uint64) Peer {
	p.Start, p.Version, p.wire, p.startPrefix = start, version, nil, KeyUint64(start)
	return p
}

// StartPrefix returns KeyUint64(p.Start), from the cache when there is one.
func (p *Peer) StartPrefix() uint64 {
	if p.startPrefix != 0 {
		return p.startPrefix
	}
	return KeyUint64(p.Start)
}

// WithAddrs returns p with new listen addresses.
func (p Peer) WithAddrs(addrs [][]byte) Peer {
	p.Addrs, p.wire = addrs, nil
	return p
}

// IsZero reports whether p names no node.
func (p Peer) IsZero() bool { return p.ID == "" }

// SameNode reports whether p and q name the same node. Membership vectors are compared first:
// they sit in the descriptor itself, an identity's bytes elsewhere in memory (a cache miss per
// comparison, much of a routing hop's cost at 50,000 nodes), and a node's membership vector is a
// function of its identity (MVecFor), so different vectors mean different nodes.
func (p Peer) SameNode(q Peer) bool { return p.MVec == q.MVec && p.ID == q.ID }
