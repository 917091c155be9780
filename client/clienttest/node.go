// Package clienttest provides an in-process fake skiprange node for tests of client code: a libp2p
// host on 127.0.0.1 that serves the client protocol (/skiprange/client/1.0.0) from an in-memory
// map. It follows the protocol's framing and the semantics of the operations (scans on the key
// circle with limits and continuations, STATUS_NOT_FOUND for absent keys); it routes nothing.
package clienttest

import (
	"bytes"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2pquic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/skiprange/skiprange/overlay/p2p"
	"github.com/skiprange/skiprange/overlay/pb"
)

// DefaultScanMax is the fake node's maximum of items per scan answer.
const DefaultScanMax = 1000

// Node is a fake skiprange node. Its exported fields may be set before the first request; change
// them later through Set.
type Node struct {
	Host host.Host

	// ScanMax is the most items one scan answer holds (a limit of 0 means ScanMax).
	ScanMax int
	// MaxItems, when positive, is the most items a request may carry or ask for: batches and
	// scan limits above it are answered STATUS_INVALID, as a real node does.
	MaxItems int
	// Handle, when set, answers requests; returning nil falls back to the map semantics.
	Handle func(*pb.ClientRequest) *pb.ClientReply
	// Raw, when set, takes over every stream (to misbehave: reset, stay silent, send garbage).
	Raw func(network.Stream)

	mu       sync.Mutex
	items    map[string][]byte
	status   *pb.NodeStatus
	requests []*pb.ClientRequest
}

// NewNode starts a fake node listening on 127.0.0.1 over TCP, secured by Noise, closed when the
// test ends. A closed TCP node refuses connections at once, which keeps tests of dead nodes fast.
func NewNode(tb testing.TB) *Node {
	tb.Helper()
	return newNode(tb, "/ip4/127.0.0.1/tcp/0")
}

// NewQUICNode is NewNode listening on QUIC-v1 as well. Dials of a closed QUIC node fail only
// when they time out.
func NewQUICNode(tb testing.TB) *Node {
	tb.Helper()
	return newNode(tb, "/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1")
}

func newNode(tb testing.TB, listen ...string) *Node {
	tb.Helper()
	h, err := libp2p.New(
		libp2p.ListenAddrStrings(listen...),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Transport(libp2pquic.NewTransport),
		libp2p.Security(noise.ID, noise.New),
		libp2p.DisableMetrics(),
		libp2p.ResourceManager(&network.NullResourceManager{}),
	)
	if err != nil {
		tb.Fatalf("clienttest: start host: %v", err)
	}
	n := &Node{Host: h, ScanMax: DefaultScanMax, items: make(map[string][]byte)}
	h.SetStreamHandler(p2p.ClientProtocol, n.serve)
	tb.Cleanup(func() { _ = h.Close() })
	return n
}

// AddrInfo is the node as a peer to dial.
func (n *Node) AddrInfo() peer.AddrInfo {
	return peer.AddrInfo{ID: n.Host.ID(), Addrs: n.Host.Addrs()}
}

// Multiaddr is the node's full TCP address, /p2p/ part included, as a user would pass it.
func (n *Node) Multiaddr() string { return n.MultiaddrFor(ma.P_TCP) }

// MultiaddrFor is the node's full address over the transport protocol code (ma.P_TCP or
// ma.P_QUIC_V1), /p2p/ part included.
func (n *Node) MultiaddrFor(code int) string {
	for _, a := range n.Host.Addrs() {
		if _, err := a.ValueForProtocol(code); err == nil {
			return a.String() + "/p2p/" + n.Host.ID().String()
		}
	}
	panic(fmt.Sprintf("clienttest: the node has no address with protocol %d", code))
}

// Ref is the node's NodeRef: peer ID bytes and binary listen addresses.
func (n *Node) Ref() *pb.NodeRef {
	ref := &pb.NodeRef{Id: []byte(n.Host.ID())}
	for _, a := range n.Host.Addrs() {
		ref.Addrs = append(ref.Addrs, a.Bytes())
	}
	return ref
}

// Set runs f under the node's lock, to change its fields while it serves.
func (n *Node) Set(f func(*Node)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f(n)
}

// SetStatus sets what the node answers to CLIENT_OP_STATUS; a nil Self is filled with Ref().
func (n *Node) SetStatus(st *pb.NodeStatus) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.status = st
}

// UpdateStatus changes the status the node answers with, under the node's lock.
func (n *Node) UpdateStatus(f func(*pb.NodeStatus)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.status == nil {
		n.status = &pb.NodeStatus{}
	}
	f(n.status)
}

// Put stores an item directly.
func (n *Node) Put(key, value string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.items[key] = []byte(value)
}

// Len returns the number of items stored.
func (n *Node) Len() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.items)
}

// Requests returns the requests received so far.
func (n *Node) Requests() []*pb.ClientRequest {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*pb.ClientRequest(nil), n.requests...)
}

func (n *Node) serve(s network.Stream) {
	n.mu.Lock()
	raw, handle := n.Raw, n.Handle
	n.mu.Unlock()
	if raw != nil {
		raw(s)
		return
	}
	req := new(pb.ClientRequest)
	if err := p2p.NewFrameReader(s).ReadMsg(req); err != nil {
		_ = s.Reset()
		return
	}
	n.mu.Lock()
	n.requests = append(n.requests, req)
	n.mu.Unlock()
	var rep *pb.ClientReply
	if handle != nil {
		rep = handle(req)
	}
	if rep == nil {
		rep = n.answer(req)
	}
	if err := p2p.NewFrameWriter(s).WriteMsg(rep); err != nil {
		_ = s.Reset()
		return
	}
	_ = s.Close()
}

func invalid(msg string) *pb.ClientReply {
	return &pb.ClientReply{Status: pb.Status_STATUS_INVALID, Error: msg}
}

func (n *Node) answer(req *pb.ClientRequest) *pb.ClientReply {
	if req.GetVersion() != p2p.ClientVersion {
		return invalid("unknown client protocol version")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	self := n.Ref()
	switch req.GetOp() {
	case pb.ClientOp_CLIENT_OP_GET:
		v, ok := n.items[string(req.GetKey())]
		if !ok {
			return &pb.ClientReply{Status: pb.Status_STATUS_NOT_FOUND, Owner: self}
		}
		return &pb.ClientReply{Value: v, Owner: self}
	case pb.ClientOp_CLIENT_OP_PUT:
		n.items[string(req.GetKey())] = req.GetValue()
		return &pb.ClientReply{Owner: self, Stored: 1}
	case pb.ClientOp_CLIENT_OP_DELETE:
		if _, ok := n.items[string(req.GetKey())]; !ok {
			return &pb.ClientReply{Status: pb.Status_STATUS_NOT_FOUND, Owner: self}
		}
		delete(n.items, string(req.GetKey()))
		return &pb.ClientReply{Owner: self}
	case pb.ClientOp_CLIENT_OP_PUT_BATCH:
		if len(req.GetItems()) == 0 || (n.MaxItems > 0 && len(req.GetItems()) > n.MaxItems) {
			return invalid(fmt.Sprintf("a batch holds 1 to %d items, not %d", n.MaxItems, len(req.GetItems())))
		}
		for _, it := range req.GetItems() {
			n.items[string(it.GetKey())] = it.GetValue()
		}
		return &pb.ClientReply{Stored: uint32(len(req.GetItems()))}
	case pb.ClientOp_CLIENT_OP_SCAN:
		if n.MaxItems > 0 && int(req.GetLimit()) > n.MaxItems {
			return invalid(fmt.Sprintf("scan limits must be in [0, %d] keys", n.MaxItems))
		}
		return n.scan(req)
	case pb.ClientOp_CLIENT_OP_STATUS:
		st := n.status
		if st == nil {
			st = &pb.NodeStatus{State: "active", Range: &pb.KeyRange{}, Items: uint64(len(n.items))}
		}
		if st.Self == nil {
			st.Self = self
		}
		return &pb.ClientReply{Node: st}
	}
	return invalid("unknown op " + req.GetOp().String())
}

// inRange reports whether k lies in [start, end) on the key circle (start == end: everywhere;
// an empty end: up to the largest key).
func inRange(k, start, end []byte) bool {
	switch c := bytes.Compare(start, end); {
	case c == 0:
		return true
	case len(end) == 0:
		return bytes.Compare(k, start) >= 0
	case c < 0:
		return bytes.Compare(k, start) >= 0 && bytes.Compare(k, end) < 0
	default:
		return bytes.Compare(k, start) >= 0 || bytes.Compare(k, end) < 0
	}
}

func (n *Node) scan(req *pb.ClientRequest) *pb.ClientReply {
	start, end := req.GetKey(), req.GetEnd()
	limit := int(req.GetLimit())
	if limit == 0 || limit > n.ScanMax {
		limit = n.ScanMax
	}
	var keys []string
	for k := range n.items {
		if inRange([]byte(k), start, end) {
			keys = append(keys, k)
		}
	}
	// Clockwise from start: the keys at or after start, then those before it (wrapped).
	sort.Slice(keys, func(i, j int) bool {
		ai, aj := keys[i] >= string(start), keys[j] >= string(start)
		if ai != aj {
			return ai
		}
		return keys[i] < keys[j]
	})
	rep := &pb.ClientReply{ServedBy: [][]byte{[]byte(n.Host.ID())}, Hops: 1}
	for i, k := range keys {
		if i == limit {
			rep.More, rep.Continuation = true, []byte(k)
			break
		}
		rep.Items = append(rep.Items, &pb.Item{Key: []byte(k), Value: n.items[k]})
	}
	return rep
}
