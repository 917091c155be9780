package p2p

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	p2ptest "github.com/libp2p/go-libp2p/core/test"
	"github.com/multiformats/go-multiaddr"
	"google.golang.org/protobuf/proto"

	"github.com/skiprange/skiprange/overlay/pb"
)

// ref returns a descriptor named id, with one address so that learnAddrs would use it.
func ref(id string) *pb.NodeRef {
	return &pb.NodeRef{Id: []byte(id), Start: []byte("start-" + id), Version: 1, Mvec: 42, Addrs: [][]byte{[]byte("addr-" + id)}}
}

func refs(ids ...string) []*pb.NodeRef {
	out := make([]*pb.NodeRef, len(ids))
	for i, id := range ids {
		out[i] = ref(id)
	}
	return out
}

func TestWalkNodeRefs(t *testing.T) {
	cases := []struct {
		name string
		m    *pb.Envelope
		want []string
	}{
		{"empty", &pb.Envelope{}, nil},
		{"ping: only from", &pb.Envelope{From: ref("from"), Body: &pb.Envelope_Ping{Ping: &pb.Ping{Seq: 1}}}, []string{"from"}},
		{"pong: singular and lists", &pb.Envelope{From: ref("from"), Body: &pb.Envelope_Pong{Pong: &pb.Pong{
			Pred: ref("pred"), Succ: ref("succ"), SuccList: refs("s1", "s2", "s3"),
			Preds: refs("p0", "p1"), Succs: refs("q0"),
		}}}, []string{"from", "pred", "succ", "s1", "s2", "s3", "p0", "p1", "q0"}},
		{"neighbor update", &pb.Envelope{From: ref("from"), Body: &pb.Envelope_NeighborUpdate{NeighborUpdate: &pb.NeighborUpdate{
			Level: 2, Side: pb.Side_SIDE_SUCC, Node: ref("new"), Expect: []byte("old-id-is-bytes-not-a-ref"),
		}}}, []string{"from", "new"}},
		{"lookup: origin and hints deep in the route", &pb.Envelope{Body: &pb.Envelope_Lookup{Lookup: &pb.Lookup{
			ReqId: 1, Origin: ref("origin"), Op: pb.Op_OP_GET,
			Route: &pb.Route{Key: []byte("k"), Hints: []*pb.LoadHint{{Node: ref("h1"), Load: 1}, {Load: 2}, {Node: ref("h2")}}},
		}}}, []string{"origin", "h1", "h2"}},
		{"handoff: succ, succ list, pred; items are not refs", &pb.Envelope{From: ref("from"), Body: &pb.Envelope_Handoff{Handoff: &pb.Handoff{
			Items: []*pb.Item{{Key: []byte("a"), Value: []byte("b")}}, Succ: ref("succ"), SuccList: refs("l1", "l2"),
			Lost: []*pb.KeyRange{{Start: []byte("a"), End: []byte("b")}}, Pred: ref("pred"),
		}}}, []string{"from", "succ", "l1", "l2", "pred"}},
		{"level found", &pb.Envelope{Body: &pb.Envelope_LevelFound{LevelFound: &pb.LevelFound{Node: ref("n"), Other: ref("o")}}}, []string{"n", "o"}},
		{"balance: a oneof inside the body's oneof", &pb.Envelope{From: ref("from"), Body: &pb.Envelope_Balance{Balance: &pb.Balance{
			Wave: 3, Op: &pb.Balance_RemoteLock{RemoteLock: &pb.RemoteLock{End: ref("end"), Migrants: refs("m1", "m2"), M: ref("m")}},
		}}}, []string{"from", "end", "m1", "m2", "m"}},
		{"balance lock chain", &pb.Envelope{Body: &pb.Envelope_Balance{Balance: &pb.Balance{
			Op: &pb.Balance_Lock{Lock: &pb.LockRequest{Chain: refs("c1", "c2", "c3")}},
		}}}, []string{"c1", "c2", "c3"}},
		{"lookup reply owner", &pb.Envelope{Body: &pb.Envelope_LookupReply{LookupReply: &pb.LookupReply{Owner: ref("owner"), Value: []byte("x")}}}, []string{"owner"}},
		{"range query: served_by are ids, not refs", &pb.Envelope{Body: &pb.Envelope_RangeQuery{RangeQuery: &pb.RangeQuery{
			Origin: ref("origin"), ServedBy: [][]byte{[]byte("x"), []byte("y")}, Items: []*pb.Item{{Key: []byte("k")}},
		}}}, []string{"origin"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			walkNodeRefs(c.m.ProtoReflect(), func(r *pb.NodeRef) {
				got = append(got, string(r.Id))
				// fn must see the message's own descriptor (learnAddrs reads its addresses).
				if len(r.Addrs) != 1 || string(r.Addrs[0]) != "addr-"+string(r.Id) {
					t.Errorf("ref %q reached fn without its addresses: %v", r.Id, r.Addrs)
				}
			})
			slices.Sort(got)
			want := slices.Clone(c.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("got refs %q, want %q", got, want)
			}
		})
	}
}

func TestWalkNodeRefsOnDecodedFrame(t *testing.T) {
	// The runtime walks messages decoded from the wire: the walk must work on them too.
	m := &pb.Envelope{From: ref("from"), Body: &pb.Envelope_Pong{Pong: &pb.Pong{Pred: ref("pred"), SuccList: refs("s1")}}}
	raw, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	dec := new(pb.Envelope)
	if err := proto.Unmarshal(raw, dec); err != nil {
		t.Fatal(err)
	}
	n := 0
	walkNodeRefs(dec.ProtoReflect(), func(*pb.NodeRef) { n++ })
	if n != 3 {
		t.Fatalf("found %d refs in the decoded message, want 3", n)
	}
}

func TestBodyName(t *testing.T) {
	cases := []struct {
		m    *pb.Envelope
		want string
	}{
		{&pb.Envelope{}, "empty"},
		{&pb.Envelope{From: ref("x"), Cause: pb.Cause_CAUSE_CLIENT}, "empty"},
		{&pb.Envelope{Body: &pb.Envelope_Lookup{Lookup: &pb.Lookup{}}}, "lookup"},
		{&pb.Envelope{Body: &pb.Envelope_LookupReply{LookupReply: &pb.LookupReply{}}}, "lookup_reply"},
		{&pb.Envelope{Body: &pb.Envelope_Pong{Pong: &pb.Pong{}}}, "pong"},
		{&pb.Envelope{Body: &pb.Envelope_HandoffCommitAck{HandoffCommitAck: &pb.HandoffCommitAck{}}}, "handoff_commit_ack"},
		{&pb.Envelope{Body: &pb.Envelope_Balance{Balance: &pb.Balance{Op: &pb.Balance_Probe{Probe: &pb.Probe{}}}}}, "balance"},
	}
	for _, c := range cases {
		if got := bodyName(c.m); got != c.want {
			t.Errorf("bodyName(%v) = %q, want %q", c.m, got, c.want)
		}
	}
}

func key8(prefix ...byte) []byte {
	k := make([]byte, 8)
	copy(k, prefix)
	return k
}

func TestRangeFraction(t *testing.T) {
	hot := key8(0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0)
	hotNext := append(slices.Clone(hot), 0) // the key right after hot
	cases := []struct {
		name string
		r    *pb.KeyRange
		want float64
	}{
		{"nil", nil, 0},
		{"full circle", &pb.KeyRange{}, 1},
		{"full circle at a non-empty start", &pb.KeyRange{Start: []byte("m"), End: []byte("m")}, 1},
		{"upper half", &pb.KeyRange{Start: []byte{0x80}}, 0.5},
		{"lower half", &pb.KeyRange{End: []byte{0x80}}, 0.5},
		{"a quarter", &pb.KeyRange{Start: []byte{0x40}, End: []byte{0x80}}, 0.25},
		{"wrapping", &pb.KeyRange{Start: []byte{0xc0}, End: []byte{0x40}}, 0.5},
		{"wrapping, 8-byte keys", &pb.KeyRange{Start: key8(0xe0), End: key8(0x20)}, 0.25},
		// A hot key alone on a node: its neighbour owns the rest of the circle, an arc whose
		// ends share their first 8 bytes.
		{"everything but one key", &pb.KeyRange{Start: hotNext, End: hot}, 1},
	}
	for _, c := range cases {
		if got := rangeFraction(c.r); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: rangeFraction(%v) = %v, want %v", c.name, c.r, got, c.want)
		}
	}
	// One key's arc is tiny but not empty.
	if got := rangeFraction(&pb.KeyRange{Start: hot, End: hotNext}); !(got > 0 && got < 1e-15) {
		t.Errorf("a one-key range: rangeFraction = %v, want a tiny positive share", got)
	}
}

func TestCheckFits(t *testing.T) {
	def := DefaultNodeConfig()
	if err := checkFits(def); err != nil {
		t.Fatalf("DefaultNodeConfig does not fit: %v", err)
	}

	big := DefaultNodeConfig()
	big.SkipGraph.MaxValueLen = 1 << 20 // 400 items of 1 MiB
	err := checkFits(big)
	if err == nil {
		t.Fatal("400 items of 1 MiB per message accepted")
	}
	if !strings.Contains(err.Error(), "33554432") || !strings.Contains(err.Error(), "frame limit") {
		t.Errorf("the error does not name the frame limit: %v", err)
	}

	chunks := DefaultNodeConfig()
	chunks.SkipGraph.ChunkItems = 100_000 // handoff chunks too big, messages fine
	if checkFits(chunks) == nil {
		t.Error("handoff chunks of 100000 full-size items accepted")
	}
}

// TestCheckFitsMatchesTheWire builds the largest messages a configuration allows and checks that
// what checkFits accepts really fits in a frame.
func TestCheckFitsMatchesTheWire(t *testing.T) {
	worst := func(keyLen, valueLen, n int) *pb.Envelope {
		k, v := bytes.Repeat([]byte{0xff}, keyLen), make([]byte, valueLen)
		items := make([]*pb.Item, n)
		for i := range items {
			items[i] = &pb.Item{Key: k, Value: v}
		}
		from := &pb.NodeRef{Id: make([]byte, 38), Start: k, Version: math.MaxUint64, Mvec: math.MaxUint64, Incarnation: math.MaxUint64,
			Addrs: [][]byte{make([]byte, 30), make([]byte, 30), make([]byte, 40)}}
		return &pb.Envelope{From: from, Cause: pb.Cause_CAUSE_BALANCE, Body: &pb.Envelope_Handoff{Handoff: &pb.Handoff{
			XferId: math.MaxUint64, Kind: pb.HandoffKind_HANDOFF_NIX, Start: k, End: k, Items: items,
			Seq: math.MaxUint32, Succ: from, SuccList: []*pb.NodeRef{from, from, from, from}, Pred: from,
		}}}
	}
	def := DefaultNodeConfig().SkipGraph
	if m := worst(def.MaxKeyLen, def.MaxValueLen, max(def.ChunkItems, def.MaxItemsPerMessage)); FrameTooLarge(m) {
		t.Fatalf("a worst-case message under DefaultNodeConfig is %d bytes, above MaxFrameSize", proto.Size(m))
	}
	// Configurations right at checkFits' limit, with few large items and many small ones.
	for _, n := range []int{1, 400, 20000} {
		c := DefaultNodeConfig()
		sg := &c.SkipGraph
		sg.MaxKeyLen = 64
		sg.ChunkItems, sg.MaxItemsPerMessage = n, n
		sg.MaxValueLen = (MaxFrameSize-frameOverhead)/n - sg.MaxKeyLen - 16
		if err := checkFits(c); err != nil {
			t.Fatalf("%d items: the largest accepted value length is refused: %v", n, err)
		}
		if m := worst(sg.MaxKeyLen, sg.MaxValueLen, n); FrameTooLarge(m) {
			t.Errorf("%d items of %d+%d bytes: checkFits accepts it, but the message is %d bytes", n, sg.MaxKeyLen, sg.MaxValueLen, proto.Size(m))
		}
		sg.MaxValueLen++
		if checkFits(c) == nil {
			t.Errorf("%d items: a value length one byte past the limit is accepted", n)
		}
	}
}

func TestIsUnknownSkiprangeProtocol(t *testing.T) {
	cases := map[protocol.ID]bool{
		OverlayProtocol:              false,
		ClientProtocol:               false,
		"/skiprange/kad/1.0.0":       false, // the DHT, under DHTPrefix
		"/skiprange/overlay/9.0.0":   true,
		"/skiprange/client/2.0.0":    true,
		"/skiprange/something/1.0.0": true,
		"/ipfs/ping/1.0.0":           false,
		"/ipfs/kad/1.0.0":            false,
		"/skiprangex/overlay/1.0.0":  false,
	}
	for id, want := range cases {
		if got := isUnknownSkiprangeProtocol(id); got != want {
			t.Errorf("isUnknownSkiprangeProtocol(%q) = %v, want %v", id, got, want)
		}
	}
	// The DHT's protocol really is the one exempted.
	if got := protocol.ID(DHTPrefix + "/kad/1.0.0"); got != "/skiprange/kad/1.0.0" {
		t.Errorf("the DHT speaks %q", got)
	}
}

func TestLoadOrCreateIdentity(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data") // does not exist yet
	path := filepath.Join(dir, "identity.key")
	key, err := LoadOrCreateIdentity(path)
	if err != nil {
		t.Fatal(err)
	}
	if key.Type() != crypto.Ed25519 {
		t.Errorf("key type %v, want Ed25519", key.Type())
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("no key file: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	if di, err := os.Stat(dir); err != nil || di.Mode().Perm()&0o077 != 0 {
		t.Errorf("data directory mode: %v %v, want no access for group and others", di.Mode().Perm(), err)
	}

	again, err := LoadOrCreateIdentity(path)
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	if !key.Equals(again) {
		t.Fatal("the reloaded key differs")
	}
	id1, _ := peer.IDFromPrivateKey(key)
	id2, _ := peer.IDFromPrivateKey(again)
	if id1 != id2 {
		t.Fatalf("peer id changed across reload: %s then %s", id1, id2)
	}

	// Another path gives another identity.
	other, err := LoadOrCreateIdentity(filepath.Join(dir, "other.key"))
	if err != nil {
		t.Fatal(err)
	}
	if key.Equals(other) {
		t.Fatal("two new identities are equal")
	}

	for name, content := range map[string][]byte{"garbage": []byte("not a key at all"), "empty": nil} {
		bad := filepath.Join(dir, name+".key")
		if err := os.WriteFile(bad, content, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadOrCreateIdentity(bad)
		if err == nil {
			t.Fatalf("%s key file accepted", name)
		}
		if msg := err.Error(); !strings.Contains(msg, bad) || !strings.Contains(msg, "move it away") {
			t.Errorf("%s key file: the error does not say which file or what to do: %v", name, err)
		}
		// The corrupt file is left for the user, not replaced by a new identity.
		if raw, _ := os.ReadFile(bad); !bytes.Equal(raw, content) {
			t.Errorf("%s key file was rewritten", name)
		}
	}

	// A path that cannot be read (a directory) is an error, not a new identity.
	if _, err := LoadOrCreateIdentity(dir); err == nil {
		t.Error("a directory accepted as a key file")
	}
}

// TestLearnedAddrsRecordedAgain: addresses heard again are recorded again once half their time
// in the peerstore has passed, not only the first time (they expired after an hour, and a node
// called on after a long partition could be dialled only through the DHT).
func TestLearnedAddrsRecordedAgain(t *testing.T) {
	h, err := libp2p.New(libp2p.NoListenAddrs)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	r := &Runtime{host: h, learned: map[peer.ID]learnedAddrs{}}
	id := p2ptest.RandPeerIDFatal(t)
	addr := multiaddr.StringCast("/ip4/10.0.0.1/tcp/4001")
	m := &pb.Envelope{From: &pb.NodeRef{Id: []byte(id), Addrs: [][]byte{addr.Bytes()}}, Body: &pb.Envelope_Ping{Ping: &pb.Ping{}}}
	t0 := time.Now()
	for _, c := range []struct {
		after    time.Duration
		recorded bool
	}{{0, true}, {10 * time.Minute, false}, {learnedAddrTTL / 2, true}} {
		h.Peerstore().ClearAddrs(id)
		r.learnAddrs(m, t0.Add(c.after))
		if got := len(h.Peerstore().Addrs(id)) > 0; got != c.recorded {
			t.Fatalf("heard again %s after it was first recorded: recorded %v, want %v", c.after, got, c.recorded)
		}
		if c.recorded {
			t0 = t0.Add(c.after)
		}
	}
}

// TestRingCheckPeriod: zero takes the default, a negative period turns the ring checks off (as
// skipnode --ring-check 0 asks), a positive one stands.
func TestRingCheckPeriod(t *testing.T) {
	for _, c := range []struct{ in, want time.Duration }{
		{0, 10 * time.Minute}, {-1, 0}, {-time.Hour, 0}, {time.Second, time.Second},
	} {
		if got := ringCheckPeriod(c.in); got != c.want {
			t.Errorf("ringCheckPeriod(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
