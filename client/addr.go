package client

import (
	"errors"
	"fmt"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/skiprange/skiprange/overlay/pb"
)

// exampleAddr shows the expected shape of an entry point in error messages.
const exampleAddr = "/ip4/127.0.0.1/tcp/4001/p2p/12D3KooW…"

// ParsePeer turns a node's full multiaddr — transport address followed by /p2p/<peer-id>, as a
// node prints it at start — into the peer to dial. The transport must be TCP or QUIC-v1 (over
// IPv4, IPv6 or a DNS name), the transports this client speaks. Every error matches ErrBadAddress
// and says what to fix.
func ParsePeer(s string) (peer.AddrInfo, error) {
	s = strings.TrimSpace(s)
	bad := func(format string, args ...any) (peer.AddrInfo, error) {
		return peer.AddrInfo{}, fmt.Errorf("%w: %s", ErrBadAddress, fmt.Sprintf(format, args...))
	}
	if s == "" {
		return bad("no address given; want the node's full multiaddr, e.g. %s", exampleAddr)
	}
	if !strings.HasPrefix(s, "/") {
		if _, err := peer.Decode(s); err == nil {
			return bad("%q is a bare peer ID; put the node's transport address in front of it: /ip4/<ip>/tcp/<port>/p2p/%s", s, s)
		}
		if strings.Contains(s, "://") || strings.Contains(s, ":") {
			return bad("%q is not a multiaddr; write host and port as a multiaddr ending in the node's peer ID, e.g. %s", s, exampleAddr)
		}
		return bad("%q is not a multiaddr (a multiaddr starts with '/'), e.g. %s", s, exampleAddr)
	}
	m, err := ma.NewMultiaddr(s)
	if err != nil {
		return bad("malformed multiaddr %q: %v; want e.g. %s", s, err, exampleAddr)
	}
	transport, id := peer.SplitAddr(m)
	if id == "" {
		if _, err := m.ValueForProtocol(ma.P_P2P); err == nil {
			return bad("in %q the /p2p/<peer-id> part must come last", s)
		}
		return bad("%q has no /p2p/<peer-id> part; append the node's peer ID (the node prints its full address at start), e.g. %s/p2p/12D3KooW…", s, s)
	}
	if len(transport) == 0 {
		return bad("%q has only a peer ID; put the node's transport address in front of it, e.g. /ip4/<ip>/tcp/<port>/p2p/%s", s, id)
	}
	if err := checkTransport(transport); err != nil {
		return bad("%q: %v", s, err)
	}
	return peer.AddrInfo{ID: id, Addrs: []ma.Multiaddr{transport}}, nil
}

// checkTransport accepts addresses this client can dial: an IP or DNS component followed by TCP,
// or by UDP and QUIC-v1, and nothing else.
func checkTransport(m ma.Multiaddr) error {
	ps := m.Protocols()
	if len(ps) == 0 {
		return errors.New("empty transport address")
	}
	switch ps[0].Code {
	case ma.P_IP4, ma.P_IP6, ma.P_DNS, ma.P_DNS4, ma.P_DNS6:
	default:
		return fmt.Errorf("the address must start with /ip4, /ip6 or /dns, not /%s", ps[0].Name)
	}
	rest := ps[1:]
	switch {
	case len(rest) == 1 && rest[0].Code == ma.P_TCP:
		return nil
	case len(rest) == 2 && rest[0].Code == ma.P_UDP && rest[1].Code == ma.P_QUIC_V1:
		return nil
	case len(rest) == 0:
		return errors.New("no port: add /tcp/<port> (or /udp/<port>/quic-v1)")
	}
	names := make([]string, len(rest))
	for i, p := range rest {
		names[i] = p.Name
	}
	return fmt.Errorf("transport /%s is not supported; this client dials /tcp/<port> and /udp/<port>/quic-v1", strings.Join(names, "/"))
}

// PeerFromRef turns a NodeRef into the peer to dial: its id holds the peer ID's bytes, its addrs
// the node's listen multiaddrs in binary form. Malformed addresses are skipped; a ref without a
// valid ID or without any valid address is an error matching ErrBadAddress.
func PeerFromRef(ref *pb.NodeRef) (peer.AddrInfo, error) {
	if ref == nil {
		return peer.AddrInfo{}, fmt.Errorf("%w: no node reference", ErrBadAddress)
	}
	id, err := peer.IDFromBytes(ref.GetId())
	if err != nil {
		return peer.AddrInfo{}, fmt.Errorf("%w: node reference has a malformed peer ID: %v", ErrBadAddress, err)
	}
	ai := peer.AddrInfo{ID: id}
	for _, b := range ref.GetAddrs() {
		m, err := ma.NewMultiaddrBytes(b)
		if err != nil {
			continue
		}
		if t, pid := peer.SplitAddr(m); pid != "" { // tolerate a /p2p/ suffix all the same
			m = t
		}
		if len(m) > 0 {
			ai.Addrs = append(ai.Addrs, m)
		}
	}
	if len(ai.Addrs) == 0 {
		return ai, fmt.Errorf("%w: node %s advertises no usable address", ErrBadAddress, ShortID(id))
	}
	return ai, nil
}

// RefID returns the peer ID of a NodeRef, or "" when it has none or a malformed one.
func RefID(ref *pb.NodeRef) peer.ID {
	id, err := peer.IDFromBytes(ref.GetId())
	if err != nil {
		return ""
	}
	return id
}

// ShortID is the short form of a peer ID used in tables and messages: its last 8 characters
// (the leading ones are the same for every key type, "12D3KooW" for Ed25519).
func ShortID(id peer.ID) string {
	if id == "" {
		return "-"
	}
	s := id.String()
	if len(s) <= 10 {
		return s
	}
	return "…" + s[len(s)-8:]
}

// PeerString is the full multiaddr of a peer, /p2p/ part included, for messages: the first
// address, or just /p2p/<id> when there is none.
func PeerString(ai peer.AddrInfo) string {
	if len(ai.Addrs) == 0 {
		return "/p2p/" + ai.ID.String()
	}
	return ai.Addrs[0].String() + "/p2p/" + ai.ID.String()
}
