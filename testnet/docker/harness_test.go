package docker

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skiprange/skiprange/client"
	"github.com/skiprange/skiprange/overlay/pb"
)

func TestKeySpace(t *testing.T) {
	ks := NewKeySpace(2000)
	prev := ks.Key(0)
	for i := 0; i < ks.N; i++ {
		k := ks.Key(i)
		if j, ok := ks.Index(k); !ok || j != i {
			t.Fatalf("Index(Key(%d)) = %d, %v", i, j, ok)
		}
		if i > 0 && string(k) <= string(prev) {
			t.Fatalf("key %d does not sort after key %d", i, i-1)
		}
		prev = k
	}
	if _, ok := ks.Index([]byte("not a key")); ok {
		t.Fatal("a foreign key has an index")
	}
	if got := string(ks.Key(ks.N + 3)); got != string(ks.Key(3)) {
		t.Fatal("Key does not wrap modulo N")
	}
	// Half the circle holds half the keys; a wrapping range holds both ends.
	half := &pb.KeyRange{Start: []byte{0x80, 0, 0, 0, 0, 0, 0, 0}, End: nil}
	if n := len(ks.Within(half)); n != 1000 {
		t.Fatalf("upper half holds %d keys, want 1000", n)
	}
	wrap := &pb.KeyRange{Start: ks.Key(1990), End: ks.Key(10)}
	if n := len(ks.Within(wrap)); n != 20 {
		t.Fatalf("wrapping range holds %d keys, want 20", n)
	}
	if n := len(ks.Within(&pb.KeyRange{})); n != ks.N {
		t.Fatalf("the full circle holds %d keys", n)
	}
}

func TestValueAndCheck(t *testing.T) {
	i, seq, ok := ParseValue(Value(42, 7))
	if !ok || i != 42 || seq != 7 {
		t.Fatalf("ParseValue(Value(42, 7)) = %d, %d, %v", i, seq, ok)
	}
	put := func(seq uint64) acked { return acked{seq: seq} }
	del := func(seq uint64) acked { return acked{seq: seq, deleted: true} }
	cases := []struct {
		val    []byte
		found  bool
		acked  acked
		issued issued
		want   Verdict
	}{
		{Value(1, 3), true, put(3), issued{seq: 3}, VerdictOK},
		{Value(1, 4), true, put(3), issued{seq: 4}, VerdictOK},    // a write in flight, or failed on the client side
		{Value(1, 2), true, put(3), issued{seq: 4}, VerdictStale}, // older than acknowledged
		{Value(1, 5), true, put(3), issued{seq: 4}, VerdictBogus}, // never issued
		{Value(2, 3), true, put(3), issued{seq: 3}, VerdictBogus}, // another key's value
		{[]byte("junk"), true, put(3), issued{seq: 3}, VerdictBogus},
		{nil, false, put(3), issued{seq: 3}, VerdictMissing},
		{nil, false, acked{}, issued{seq: 1}, VerdictOK},                     // never acknowledged
		{nil, false, del(3), issued{seq: 3, delete: 3}, VerdictOK},           // deleted
		{nil, false, put(3), issued{seq: 4, delete: 4}, VerdictOK},           // a delete in flight, or failed
		{nil, false, put(3), issued{seq: 3, delete: 2}, VerdictMissing},      // deleted, then put again
		{Value(1, 2), true, del(3), issued{seq: 3, delete: 3}, VerdictStale}, // the delete undone
		{Value(1, 4), true, del(3), issued{seq: 4, delete: 3}, VerdictOK},    // put again after it
		{Value(1, 3), true, put(2), issued{seq: 3, delete: 3}, VerdictBogus}, // s3 is a delete: no value
	}
	for _, c := range cases {
		if got, msg := check(1, c.val, c.found, c.acked, c.issued); got != c.want {
			t.Errorf("check(%q, found=%v, acked %+v, issued %+v) = %v (%s), want %v", c.val, c.found, c.acked, c.issued, got, msg, c.want)
		}
	}
}

func TestModelWrites(t *testing.T) {
	m := NewModel(NewKeySpace(10))
	seq, ok := m.beginWrite(3, time.Now(), false)
	if !ok || seq != 1 {
		t.Fatalf("first write: %d, %v", seq, ok)
	}
	if _, ok := m.beginWrite(3, time.Now(), false); ok {
		t.Fatal("a second write while one is in flight")
	}
	m.endWrite(3, seq, time.Now(), false, time.Minute, "node1", "", "timeout")
	if _, ok := m.beginWrite(3, time.Now(), false); ok {
		t.Fatal("a write during the quiet period after a failed one")
	}
	if m.ackedOf(3) != (acked{}) || m.issuedOf(3) != (issued{seq: 1}) {
		t.Fatalf("acked %+v issued %+v after a failed write", m.ackedOf(3), m.issuedOf(3))
	}
	// A delete acknowledged.
	seq, ok = m.beginWrite(5, time.Now(), true)
	if !ok {
		t.Fatal("no delete of a fresh key")
	}
	m.endWrite(5, seq, time.Now(), true, time.Minute, "node1", "", "ok")
	if m.ackedOf(5) != (acked{seq: 1, deleted: true}) || m.issuedOf(5) != (issued{seq: 1, delete: 1}) {
		t.Fatalf("after an acknowledged delete: acked %+v issued %+v", m.ackedOf(5), m.issuedOf(5))
	}
}

func TestWhole(t *testing.T) {
	nodes := []*Node{{Service: "node0", ID: "a"}, {Service: "node1", ID: "b"}, {Service: "node2", ID: "c"}}
	ring := func(bounds ...byte) *client.Ring {
		r := &client.Ring{Closed: true}
		for i := range bounds {
			kr := &pb.KeyRange{Start: []byte{bounds[i]}, End: []byte{bounds[(i+1)%len(bounds)]}}
			rn := client.RingNode{Status: &pb.NodeStatus{State: "active", Range: kr}}
			rn.Peer.ID = nodes[i].ID
			r.Nodes = append(r.Nodes, rn)
		}
		return r
	}
	if why := Whole(ring(0x10, 0x80, 0xc0), nodes); why != "" {
		t.Fatalf("a partition of the circle is not whole: %s", why)
	}
	// Consecutive ranges meet, yet they go round the circle twice.
	if why := Whole(ring(0x10, 0x80, 0x20), nodes); why == "" {
		t.Fatal("ranges going round the circle twice accepted")
	}
	if why := Whole(ring(0x10, 0x80, 0xc0), nodes[:2]); why == "" {
		t.Fatal("an unexpected node accepted")
	}
	r := ring(0x10, 0x80, 0xc0)
	r.Issues = append(r.Issues, client.RingIssue{Severity: client.SevWarning, Msg: "gap"})
	if why := Whole(r, nodes); why == "" {
		t.Fatal("a ring with an issue accepted")
	}
}

func TestParseCompose(t *testing.T) {
	// The layout skipnet compose writes (cmd/skipnet/compose.go), two services.
	const file = `# Generated by ` + "`skipnet compose --nodes 2`" + `
version: "2.4"

networks:
  skiprange:
    driver: bridge

volumes:
  node0:
  node1:

services:
  node0:
    image: skiprange/skipnode:dev
    container_name: skiprange-node0
    command: ["--data-dir", "/data"]
    volumes:
      - node0:/data
    networks:
      skiprange:
        ipv4_address: 10.213.0.10
  node1:
    image: skiprange/skipnode:dev
    container_name: skiprange-node1
    networks:
      skiprange:
        ipv4_address: 10.213.0.11
    depends_on: [node0]
`
	path := filepath.Join(t.TempDir(), "docker-compose.yml")
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	nodes, err := parseCompose(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 || nodes[1].Container != "skiprange-node1" || nodes[1].IP != "10.213.0.11" || nodes[0].Service != "node0" {
		t.Fatalf("parsed %+v %+v", nodes[0], nodes[1])
	}
}
