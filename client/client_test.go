package client_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/skiprange/skiprange/client"
	"github.com/skiprange/skiprange/client/clienttest"
	"github.com/skiprange/skiprange/overlay/p2p"
	"github.com/skiprange/skiprange/overlay/pb"
)

func newClient(t *testing.T, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(context.Background(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return c
}

func keys(items []*pb.Item) string {
	var ks []string
	for _, it := range items {
		ks = append(ks, string(it.GetKey()))
	}
	return strings.Join(ks, ",")
}

func TestGetPutDelete(t *testing.T) {
	n := clienttest.NewNode(t)
	c := newClient(t)
	entry := n.AddrInfo()

	if _, err := c.Put(ctx(t), entry, []byte("apple"), []byte("red")); err != nil {
		t.Fatal(err)
	}
	rep, err := c.Get(ctx(t), entry, []byte("apple"))
	if err != nil {
		t.Fatal(err)
	}
	if string(rep.GetValue()) != "red" {
		t.Fatalf("get apple = %q, want red", rep.GetValue())
	}
	if client.RefID(rep.GetOwner()) != n.Host.ID() {
		t.Errorf("owner = %v, want the node", client.RefID(rep.GetOwner()))
	}

	rep, err = c.Get(ctx(t), entry, []byte("pear"))
	if !errors.Is(err, client.ErrNotFound) || client.Class(err) != "not_found" {
		t.Fatalf("get pear: err = %v, want ErrNotFound", err)
	}
	if rep == nil || rep.GetStatus() != pb.Status_STATUS_NOT_FOUND {
		t.Fatalf("get pear: the reply should come back with the error, got %v", rep)
	}
	if errors.Is(err, client.ErrOverlay) {
		t.Error("NOT_FOUND must not match ErrOverlay")
	}

	if _, err := c.Delete(ctx(t), entry, []byte("apple")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx(t), entry, []byte("apple")); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("get after delete: err = %v, want ErrNotFound", err)
	}
	if _, err := c.Delete(ctx(t), entry, []byte("apple")); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("delete absent: err = %v, want ErrNotFound", err)
	}
	for _, r := range n.Requests() {
		if r.GetVersion() != p2p.ClientVersion {
			t.Fatalf("request version %d, want %d", r.GetVersion(), p2p.ClientVersion)
		}
	}
}

func TestTransports(t *testing.T) {
	n := clienttest.NewQUICNode(t)
	n.Put("k", "v")
	for _, code := range []int{ma.P_TCP, ma.P_QUIC_V1} {
		entry, err := client.ParsePeer(n.MultiaddrFor(code))
		if err != nil {
			t.Fatal(err)
		}
		c := newClient(t) // a fresh host: no connection to reuse
		rep, err := c.Get(ctx(t), entry, []byte("k"))
		if err != nil || string(rep.GetValue()) != "v" {
			t.Fatalf("%s: %v %v", entry.Addrs[0], rep, err)
		}
		conns := c.Host().Network().ConnsToPeer(entry.ID)
		if len(conns) != 1 || !conns[0].RemoteMultiaddr().Equal(entry.Addrs[0]) {
			t.Errorf("%s: connected over %v", entry.Addrs[0], conns)
		}
	}
}

func TestStatusErrors(t *testing.T) {
	n := clienttest.NewNode(t)
	n.Handle = func(req *pb.ClientRequest) *pb.ClientReply {
		switch string(req.GetKey()) {
		case "lost":
			return &pb.ClientReply{Status: pb.Status_STATUS_LOST}
		case "bad":
			return &pb.ClientReply{Status: pb.Status_STATUS_INVALID, Error: "key too long"}
		case "err":
			return &pb.ClientReply{Status: pb.Status_STATUS_ERROR, Error: "owner timed out"}
		case "hops":
			return &pb.ClientReply{Status: pb.Status_STATUS_HOP_LIMIT, Error: "4096 hops"}
		}
		return nil
	}
	c := newClient(t)
	for _, tc := range []struct {
		key, class, msg string
		is              []error
		isNot           []error
	}{
		{"lost", "lost", "lost with a failed node", []error{client.ErrLost}, []error{client.ErrOverlay, client.ErrNotFound}},
		{"bad", "invalid", "key too long", []error{client.ErrInvalid, client.ErrOverlay}, []error{client.ErrLost}},
		{"err", "overlay", "owner timed out", []error{client.ErrOverlay}, []error{client.ErrInvalid}},
		{"hops", "overlay", "hop limit", []error{client.ErrOverlay}, []error{client.ErrInvalid}},
	} {
		_, err := c.Get(ctx(t), n.AddrInfo(), []byte(tc.key))
		if client.Class(err) != tc.class {
			t.Errorf("%s: class %q, want %q (err %v)", tc.key, client.Class(err), tc.class, err)
		}
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: err %v should mention %q", tc.key, err, tc.msg)
		}
		var se *client.StatusError
		if !errors.As(err, &se) {
			t.Errorf("%s: err %T is not a *StatusError", tc.key, err)
		}
		for _, e := range tc.is {
			if !errors.Is(err, e) {
				t.Errorf("%s: err should match %v", tc.key, e)
			}
		}
		for _, e := range tc.isNot {
			if errors.Is(err, e) {
				t.Errorf("%s: err should not match %v", tc.key, e)
			}
		}
	}
	// Do itself returns every reply without error.
	rep, err := c.Do(ctx(t), n.AddrInfo(), &pb.ClientRequest{Op: pb.ClientOp_CLIENT_OP_GET, Key: []byte("err")})
	if err != nil || rep.GetStatus() != pb.Status_STATUS_ERROR {
		t.Fatalf("Do: rep %v err %v, want STATUS_ERROR and no error", rep, err)
	}
}

func TestScan(t *testing.T) {
	n := clienttest.NewNode(t)
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		n.Put(k, "v"+k)
	}
	c := newClient(t)
	e := n.AddrInfo()
	for _, tc := range []struct {
		start, end string
		limit      uint32
		want       string
		more       bool
		cont       string
	}{
		{"b", "d", 0, "b,c", false, ""},
		{"d", "b", 0, "d,e,a", false, ""}, // wraps the seam
		{"c", "c", 0, "c,d,e,a,b", false, ""},
		{"", "", 0, "a,b,c,d,e", false, ""},
		{"c", "", 0, "c,d,e", false, ""},
		{"a", "", 2, "a,b", true, "c"},
	} {
		rep, err := c.Scan(ctx(t), e, []byte(tc.start), []byte(tc.end), tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if got := keys(rep.GetItems()); got != tc.want || rep.GetMore() != tc.more || string(rep.GetContinuation()) != tc.cont {
			t.Errorf("scan [%q,%q) limit %d = %s more %v cont %q, want %s %v %q", tc.start, tc.end, tc.limit,
				got, rep.GetMore(), rep.GetContinuation(), tc.want, tc.more, tc.cont)
		}
	}

	// ScanAll follows continuations: a node answering 2 items at a time.
	n.Set(func(n *clienttest.Node) { n.ScanMax = 2 })
	res, err := c.ScanAll(ctx(t), e, []byte("b"), []byte("b"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(res.Items); got != "b,c,d,e,a" || res.More || res.Pages != 3 || res.Hops != 3 {
		t.Fatalf("ScanAll whole circle = %s more %v pages %d hops %d", got, res.More, res.Pages, res.Hops)
	}
	if len(res.ServedBy) != 1 || peer.ID(res.ServedBy[0]) != n.Host.ID() {
		t.Errorf("served by %v", res.ServedBy)
	}
	res, err = c.ScanAll(ctx(t), e, []byte("a"), nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(res.Items); got != "a,b,c" || !res.More || string(res.Continuation) != "d" {
		t.Fatalf("ScanAll max 3 = %s more %v cont %q, want a,b,c true d", got, res.More, res.Continuation)
	}
	// The page limits ask only for what is still wanted.
	reqs := n.Requests()
	if last := reqs[len(reqs)-1]; last.GetLimit() != 1 {
		t.Errorf("last page asked for %d items, want 1", last.GetLimit())
	}
}

func TestScanAllAboveNodeMax(t *testing.T) {
	n := clienttest.NewNode(t)
	n.ScanMax, n.MaxItems = 3, 3
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		n.Put(k, "")
	}
	c := newClient(t)
	res, err := c.ScanAll(ctx(t), n.AddrInfo(), []byte("a"), nil, 5)
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(res.Items); got != "a,b,c,d,e" || !res.More || string(res.Continuation) != "f" || res.Pages != 2 {
		t.Fatalf("ScanAll max 5 over a node max of 3 = %s more %v cont %q pages %d", got, res.More, res.Continuation, res.Pages)
	}
	// A scan the node rejects for another reason still fails.
	n.Set(func(n *clienttest.Node) {
		n.Handle = func(*pb.ClientRequest) *pb.ClientReply {
			return &pb.ClientReply{Status: pb.Status_STATUS_INVALID, Error: "no"}
		}
	})
	if _, err := c.ScanAll(ctx(t), n.AddrInfo(), []byte("a"), nil, 5); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
}

func TestScanNoProgress(t *testing.T) {
	n := clienttest.NewNode(t)
	n.Handle = func(req *pb.ClientRequest) *pb.ClientReply {
		return &pb.ClientReply{More: true, Continuation: req.GetKey()} // stuck
	}
	c := newClient(t)
	_, err := c.ScanAll(ctx(t), n.AddrInfo(), []byte("a"), []byte("z"), 0)
	if !errors.Is(err, client.ErrProtocol) {
		t.Fatalf("err = %v, want ErrProtocol", err)
	}
}

func TestPrefix(t *testing.T) {
	n := clienttest.NewNode(t)
	for _, k := range []string{"a", "ab", "abc", "abd", "ac", "b", "\xff", "\xff\xff", "\xff\x01"} {
		n.Put(k, "")
	}
	c := newClient(t)
	for _, tc := range []struct{ p, want string }{
		{"ab", "ab,abc,abd"},
		{"a", "a,ab,abc,abd,ac"},
		{"abz", ""},
		{"\xff", "\xff,\xff\x01,\xff\xff"},
		{"\xff\xff", "\xff\xff"},
		{"", "a,ab,abc,abd,ac,b,\xff,\xff\x01,\xff\xff"},
	} {
		res, err := c.Prefix(ctx(t), n.AddrInfo(), []byte(tc.p), 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := keys(res.Items); got != tc.want {
			t.Errorf("prefix %q = %q, want %q", tc.p, got, tc.want)
		}
	}
	res, err := c.Prefix(ctx(t), n.AddrInfo(), []byte("a"), 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(res.Items); got != "a,ab" || !res.More {
		t.Errorf("prefix a max 2 = %q more %v", got, res.More)
	}
}

func TestPrefixEnd(t *testing.T) {
	for _, tc := range []struct{ p, want string }{
		{"", ""},
		{"a", "b"},
		{"ab", "ac"},
		{"a\xff", "b"},
		{"a\xff\xff", "b"},
		{"a\xfe", "a\xff"},
		{"\x00", "\x01"},
		{"\xff", ""},
		{"\xff\xff\xff", ""},
		{"\x01\xff\x02\xff", "\x01\xff\x03"},
	} {
		in := []byte(tc.p)
		got := client.PrefixEnd(in)
		if string(got) != tc.want {
			t.Errorf("PrefixEnd(%q) = %q, want %q", tc.p, got, tc.want)
		}
		if string(in) != tc.p {
			t.Errorf("PrefixEnd modified its input: %q", in)
		}
	}
}

func TestPutBatchAndStatus(t *testing.T) {
	n := clienttest.NewNode(t)
	c := newClient(t)
	items := []*pb.Item{{Key: []byte("x"), Value: []byte("1")}, {Key: []byte("y"), Value: []byte("2")}}
	rep, err := c.PutBatch(ctx(t), n.AddrInfo(), items)
	if err != nil || rep.GetStored() != 2 || n.Len() != 2 {
		t.Fatalf("PutBatch: stored %d, node has %d, err %v", rep.GetStored(), n.Len(), err)
	}
	n.SetStatus(&pb.NodeStatus{State: "active", Items: 2, Load: 3.5, Thres: 10, Range: &pb.KeyRange{Start: []byte("a"), End: []byte("m")}})
	st, err := c.Status(ctx(t), n.AddrInfo())
	if err != nil {
		t.Fatal(err)
	}
	if st.GetItems() != 2 || st.GetLoad() != 3.5 || string(st.GetRange().GetEnd()) != "m" || client.RefID(st.GetSelf()) != n.Host.ID() {
		t.Fatalf("status = %v", st)
	}
}

func TestTooLargeNotSent(t *testing.T) {
	n := clienttest.NewNode(t)
	c := newClient(t)
	big := make([]byte, p2p.MaxFrameSize)
	_, err := c.Put(ctx(t), n.AddrInfo(), []byte("k"), big)
	if !errors.Is(err, client.ErrTooLarge) || client.Class(err) != "too_large" {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	if len(n.Requests()) != 0 {
		t.Fatal("an oversized request reached the node")
	}
	if n.Host.Network().Connectedness(c.Host().ID()) == network.Connected {
		t.Error("the client connected although the request was too large")
	}
}

func TestStreamReset(t *testing.T) {
	n := clienttest.NewNode(t)
	n.Raw = func(s network.Stream) {
		_ = p2p.NewFrameReader(s).ReadMsg(new(pb.ClientRequest))
		_ = s.Reset()
	}
	c := newClient(t)
	_, err := c.Get(ctx(t), n.AddrInfo(), []byte("k"))
	if !errors.Is(err, client.ErrProtocol) || client.Class(err) != "protocol" {
		t.Fatalf("err = %v, want ErrProtocol", err)
	}
	var te *client.TransportError
	if !errors.As(err, &te) || te.Peer != n.Host.ID() || te.Op != pb.ClientOp_CLIENT_OP_GET {
		t.Fatalf("err = %#v, want a TransportError naming the peer and op", err)
	}
}

func TestNoReply(t *testing.T) {
	n := clienttest.NewNode(t)
	n.Raw = func(s network.Stream) {
		_ = p2p.NewFrameReader(s).ReadMsg(new(pb.ClientRequest))
		_ = s.Close()
	}
	c := newClient(t)
	_, err := c.Get(ctx(t), n.AddrInfo(), []byte("k"))
	if !errors.Is(err, client.ErrProtocol) || !strings.Contains(err.Error(), "without replying") {
		t.Fatalf("err = %v, want ErrProtocol (no reply)", err)
	}
}

func TestProtocolNotSupported(t *testing.T) {
	n := clienttest.NewNode(t)
	n.Host.RemoveStreamHandler(p2p.ClientProtocol)
	c := newClient(t)
	_, err := c.Status(ctx(t), n.AddrInfo())
	if !errors.Is(err, client.ErrProtocol) || !strings.Contains(err.Error(), "client protocol") {
		t.Fatalf("err = %v, want ErrProtocol (not supported)", err)
	}
}

func TestUnreachable(t *testing.T) {
	n := clienttest.NewNode(t)
	dead := n.AddrInfo()
	_ = n.Host.Close() // connection refused from now on
	c := newClient(t)
	start := time.Now()
	_, err := c.Get(ctx(t), dead, []byte("k"))
	if !errors.Is(err, client.ErrUnreachable) || client.Class(err) != "unreachable" {
		t.Fatalf("err = %v, want ErrUnreachable", err)
	}
	if time.Since(start) > 3*time.Second {
		t.Errorf("a refused connection took %v", time.Since(start))
	}

	// A dead QUIC address fails only at the deadline: still unreachable, not a timeout.
	q := clienttest.NewQUICNode(t)
	qdead, err := client.ParsePeer(q.MultiaddrFor(ma.P_QUIC_V1))
	if err != nil {
		t.Fatal(err)
	}
	_ = q.Host.Close()
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = c.Get(short, qdead, []byte("k"))
	if !errors.Is(err, client.ErrUnreachable) || !strings.Contains(err.Error(), "before the deadline") {
		t.Fatalf("dead QUIC node: err = %v, want ErrUnreachable", err)
	}

	// A live node at the address, but not the peer asked for.
	other := clienttest.NewNode(t)
	wrong := peer.AddrInfo{ID: dead.ID, Addrs: other.Host.Addrs()}
	_, err = c.Get(ctx(t), wrong, []byte("k"))
	if !errors.Is(err, client.ErrUnreachable) {
		t.Fatalf("wrong peer ID: err = %v, want ErrUnreachable", err)
	}
}

func TestTimeoutAndCancel(t *testing.T) {
	n := clienttest.NewNode(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	n.Raw = func(s network.Stream) {
		<-release // never answers while the test runs
		_ = s.Reset()
	}
	c := newClient(t, client.WithTimeout(300*time.Millisecond))
	start := time.Now()
	_, err := c.Get(context.Background(), n.AddrInfo(), []byte("k")) // the client's timeout applies
	if !errors.Is(err, client.ErrTimeout) || client.Class(err) != "timeout" {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("timeout took %v", d)
	}

	cctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err = c.Get(cctx, n.AddrInfo(), []byte("k"))
	if !errors.Is(err, context.Canceled) || client.Class(err) != "canceled" {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestParsePeer(t *testing.T) {
	_, pub, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := peer.IDFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	id := pid.String()
	for _, tc := range []struct{ in, want string }{
		{"", "no address given"},
		{id, "bare peer ID"},
		{"127.0.0.1:4001", "not a multiaddr"},
		{"localhost", "starts with '/'"},
		{"/ip4/127.0.0.1/tcp/4001", "no /p2p/<peer-id> part"},
		{"/ip4/999.0.0.1/tcp/4001/p2p/" + id, "malformed multiaddr"},
		{"/ip4/127.0.0.1/tcp/4001/p2p/notanid", "malformed multiaddr"},
		{"/p2p/" + id, "only a peer ID"},
		{"/ip4/127.0.0.1/p2p/" + id, "no port"},
		{"/ip4/127.0.0.1/tcp/4001/ws/p2p/" + id, "not supported"},
		{"/tcp/4001/p2p/" + id, "must start with /ip4"},
	} {
		_, err := client.ParsePeer(tc.in)
		if !errors.Is(err, client.ErrBadAddress) || client.Class(err) != "bad_address" {
			t.Errorf("ParsePeer(%q): err = %v, want ErrBadAddress", tc.in, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParsePeer(%q): %q should say %q", tc.in, err, tc.want)
		}
	}
	for _, in := range []string{
		"/ip4/127.0.0.1/tcp/4001/p2p/" + id,
		" /ip6/::1/udp/4001/quic-v1/p2p/" + id + "\n",
		"/dns4/node1.example/tcp/4001/p2p/" + id,
	} {
		ai, err := client.ParsePeer(in)
		if err != nil {
			t.Errorf("ParsePeer(%q): %v", in, err)
			continue
		}
		if ai.ID.String() != id || len(ai.Addrs) != 1 || strings.Contains(ai.Addrs[0].String(), "p2p") {
			t.Errorf("ParsePeer(%q) = %v", in, ai)
		}
	}
}

func TestPeerFromRef(t *testing.T) {
	n := clienttest.NewNode(t)
	ai, err := client.PeerFromRef(n.Ref())
	if err != nil || ai.ID != n.Host.ID() || len(ai.Addrs) != len(n.Host.Addrs()) {
		t.Fatalf("PeerFromRef = %v, %v", ai, err)
	}
	ref := n.Ref()
	p2pPart, _ := ma.NewMultiaddr("/p2p/" + n.Host.ID().String())
	ref.Addrs = [][]byte{[]byte("garbage"), n.Host.Addrs()[0].Encapsulate(p2pPart).Bytes()}
	ai, err = client.PeerFromRef(ref)
	if err != nil || len(ai.Addrs) != 1 || !ai.Addrs[0].Equal(n.Host.Addrs()[0]) {
		t.Fatalf("PeerFromRef with garbage and a /p2p suffix = %v, %v", ai, err)
	}
	for _, bad := range []*pb.NodeRef{nil, {Id: []byte("x")}, {Id: []byte(n.Host.ID())}} {
		if _, err := client.PeerFromRef(bad); !errors.Is(err, client.ErrBadAddress) {
			t.Errorf("PeerFromRef(%v): err = %v, want ErrBadAddress", bad, err)
		}
	}
}

func TestShortID(t *testing.T) {
	n := clienttest.NewNode(t)
	s := client.ShortID(n.Host.ID())
	if !strings.HasSuffix(n.Host.ID().String(), strings.TrimPrefix(s, "…")) || len([]rune(s)) != 9 {
		t.Errorf("ShortID = %q", s)
	}
	if client.ShortID("") != "-" {
		t.Error("ShortID of the empty ID")
	}
	if !bytes.Contains([]byte(client.PeerString(n.AddrInfo())), []byte("/p2p/")) {
		t.Error("PeerString lacks /p2p/")
	}
}
