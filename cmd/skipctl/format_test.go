package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/skiprange/skiprange/client"
	"github.com/skiprange/skiprange/overlay/pb"
)

func newID(t *testing.T) peer.ID {
	t.Helper()
	_, pub, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// cannedRing is a closed ring of three nodes; the last one is overloaded and locked.
func cannedRing(t *testing.T) *client.Ring {
	ids := []peer.ID{newID(t), newID(t), newID(t)}
	ref := func(i int) *pb.NodeRef { return &pb.NodeRef{Id: []byte(ids[i%3])} }
	bounds := []string{"", "g", "p"}
	loads := []float64{5, 0, 20}
	r := &client.Ring{Closed: true}
	for i := range ids {
		st := &pb.NodeStatus{
			Self:      ref(i),
			State:     "active",
			Range:     &pb.KeyRange{Start: []byte(bounds[i]), End: []byte(bounds[(i+1)%3])},
			Items:     uint64(100 * (i + 1)),
			Load:      loads[i],
			Thres:     10,
			LostItems: uint64(i),
			Levels:    []*pb.LevelLinks{{Pred: ref(i + 2), Succ: ref(i + 1)}},
		}
		if i == 2 {
			st.Locked, st.LockWave = true, 7
		}
		r.Nodes = append(r.Nodes, client.RingNode{Peer: peer.AddrInfo{ID: ids[i]}, Status: st})
	}
	return r
}

func TestRenderRing(t *testing.T) {
	r := cannedRing(t)
	r.Issues = []client.RingIssue{{Severity: client.SevWarning, Msg: "something odd"}}
	var b bytes.Buffer
	renderRing(&b, r, false, false, 40)
	out := b.String()
	lines := strings.Split(out, "\n")
	for _, want := range []string{"node", "range", "items", "load", "thres", "locked",
		`["" .. g)`, "[p .. \"\")", "20.0*", "wave 7", client.ShortID(r.Nodes[2].Peer.ID),
		"nodes 3", "items 600", "lost items 3", "overloaded 1", "ring closed, with warnings", "warning: something odd"} {
		if !strings.Contains(out, want) {
			t.Errorf("ring output lacks %q:\n%s", want, out)
		}
	}
	// Table columns line up: the last column starts in the same place in every row, and the
	// right-aligned numbers end where their header ends.
	col := func(line, word string) int { return utf8.RuneCountInString(line[:strings.Index(line, word)]) }
	for _, l := range lines[1:4] {
		if col(l, "active") != col(lines[0], "state") {
			t.Errorf("row %q: state column at %d, header at %d", l, col(l, "active"), col(lines[0], "state"))
		}
		if col(l, "10.0")+4 != col(lines[0], "thres")+5 {
			t.Errorf("row %q: thres column misaligned", l)
		}
	}
	// Bars: the highest load gets the full width, the others in proportion.
	bars := map[int]int{}
	for _, l := range lines {
		if i := strings.Index(l, "│"); i >= 0 {
			bars[len(bars)] = strings.Count(l[i:], "█")
		}
	}
	if bars[2] != 40 || bars[0] != 10 || bars[1] != 0 {
		t.Errorf("bar lengths %v, want 10, 0, 40", bars)
	}

	b.Reset()
	renderRing(&b, r, false, true, 20)
	if strings.Contains(b.String(), "█") || !strings.Contains(b.String(), strings.Repeat("#", 20)+" 20.0*") {
		t.Errorf("ASCII bars:\n%s", b.String())
	}
}

func TestRenderBarsFractions(t *testing.T) {
	var b bytes.Buffer
	renderBars(&b, []string{"a", "bb"}, []float64{1, 8}, []string{"", "*"}, 8, false)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "│█ ") || !strings.Contains(lines[1], "│████████ 8.0*") {
		t.Errorf("bars:\n%s", b.String())
	}
	// Bars of every row end in the same column.
	if utf8.RuneCountInString(lines[0][:strings.LastIndex(lines[0], " ")]) != utf8.RuneCountInString(lines[1][:strings.LastIndex(lines[1], " ")]) {
		t.Errorf("bars not aligned:\n%s", b.String())
	}
	b.Reset()
	renderBars(&b, []string{"a"}, []float64{0}, []string{""}, 8, false)
	if !strings.Contains(b.String(), "every load is 0") {
		t.Errorf("zero loads: %q", b.String())
	}
	b.Reset()
	renderBars(&b, []string{"a", "b"}, []float64{3, 16}, []string{"", ""}, 8, false)
	if !strings.Contains(b.String(), "│█▌") { // 3/16·8 = 1.5 cells
		t.Errorf("fractional bar: %q", b.String())
	}
}

func TestRingJSON(t *testing.T) {
	r := cannedRing(t)
	r.Closed = false
	r.Issues = []client.RingIssue{{Severity: client.SevError, Node: r.Nodes[1].Peer.ID, At: -1, Msg: "unreachable",
		Err: &client.TransportError{Kind: client.ErrUnreachable}}}
	b, err := json.Marshal(ringJSON(r, false))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OK     bool `json:"ok"`
		Closed bool `json:"closed"`
		Nodes  []struct {
			ID         string `json:"id"`
			Overloaded bool   `json:"overloaded"`
			Range      struct {
				Start, End string
			} `json:"range"`
			Levels []struct {
				Succ struct{ ID string } `json:"succ"`
			} `json:"levels"`
		} `json:"nodes"`
		Totals ringTotals `json:"totals"`
		Issues []jsonIssue
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OK || doc.Closed || len(doc.Nodes) != 3 || !doc.Nodes[2].Overloaded || doc.Nodes[0].Overloaded ||
		doc.Nodes[1].Range.Start != "g" || doc.Nodes[0].Levels[0].Succ.ID != r.Nodes[1].Peer.ID.String() {
		t.Errorf("ring JSON: %s", b)
	}
	if doc.Totals != (ringTotals{Nodes: 3, Items: 600, LostItems: 3, Overloaded: 1, Locked: 1, Load: 25}) {
		t.Errorf("totals %+v", doc.Totals)
	}
	if len(doc.Issues) != 1 || doc.Issues[0].Class != "unreachable" || doc.Issues[0].Severity != "error" {
		t.Errorf("issues %+v", doc.Issues)
	}
	if code := exitCode(ringErr(r)); code != exitUnreachable {
		t.Errorf("ring with an unreachable successor exits %d", code)
	}
	r.Issues[0].Err = nil
	if code := exitCode(ringErr(r)); code != exitOverlay {
		t.Errorf("broken ring exits %d", code)
	}
}

func TestRenderStatus(t *testing.T) {
	r := cannedRing(t)
	st := r.Nodes[2].Status
	st.Algorithm = "nixmig"
	st.OverThres = 15
	st.Lost = []*pb.KeyRange{{Start: []byte("q"), End: []byte("r")}}
	st.Tombstones = 3
	st.Counters = map[string]uint64{"waves": 3, "nix": 12}
	st.Levels = append(st.Levels, &pb.LevelLinks{Pred: r.Nodes[0].Status.Self, Succ: nil})
	var b bytes.Buffer
	renderStatus(&b, st, false)
	out := b.String()
	for _, want := range []string{
		"node       " + r.Nodes[2].Peer.ID.String(), "state      active", "algorithm  nixmig",
		`range      [p .. "")`, "items      300", "load       20.0 / thres 10.0 (over_thres 15.0)  * overloaded",
		"lock       locked by wave 7", "lost       2 items in 1 range [q .. r)", "deleted    3 deleted keys remembered against older copies",
		"level  pred", client.ShortID(r.Nodes[1].Peer.ID), "counters", "nix", "waves",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "nix ") > strings.Index(out, "waves") {
		t.Error("counters are not sorted")
	}
	b.Reset()
	renderStatus(&b, &pb.NodeStatus{}, true)
	if !strings.Contains(b.String(), "levels     none") || !strings.Contains(b.String(), "lock       free") {
		t.Errorf("empty status:\n%s", b.String())
	}
	// JSON: valid, with hex forms of the range.
	doc, err := json.Marshal(nodeJSON(st, false))
	if err != nil {
		t.Fatal(err)
	}
	var back jsonNode
	if err := json.Unmarshal(doc, &back); err != nil || back.Range.StartHex != "70" || !back.Overloaded || back.Counters["nix"] != 12 || back.Tombstones != 3 {
		t.Errorf("status JSON %s (%v)", doc, err)
	}
}

func TestRenderBench(t *testing.T) {
	rep := benchReport{
		Workload: "pulse(10%)", Entry: "/ip4/127.0.0.1/tcp/1/p2p/x", Rate: 100, Duration: 10, Concurrency: 4,
		Reads: 0.9, Ops: 10, Elapsed: 10, Throughput: 1, Errors: 1, ErrorsByClass: map[string]int{"timeout": 1},
		PerOp: map[string]opReport{"get": {Count: 10, OK: 8, Miss: 1, Errors: 1, P50ms: 1.5, P90ms: 2, P99ms: 30, Maxms: 1200, MeanHops: 2.5, MaxHops: 4}},
	}
	rep.All = rep.PerOp["get"]
	var b bytes.Buffer
	renderBench(&b, rep)
	for _, want := range []string{"pulse(10%)", "100 ops/s offered", "errors 1 (10.0%)", "1.50ms", "30.00ms", "1.20s", "2.50", "timeout 1"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("bench output lacks %q:\n%s", want, b.String())
		}
	}
}
