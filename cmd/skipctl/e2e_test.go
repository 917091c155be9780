package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skiprange/skiprange/client/clienttest"
	"github.com/skiprange/skiprange/overlay/pb"
)

func TestKeyCommands(t *testing.T) {
	n := clienttest.NewNode(t)
	env := map[string]string{"SKIPCTL_PEER": n.Multiaddr()}

	r := runCLI(t, env, "put", "apple", "red")
	if r.code != 0 || !strings.Contains(r.stdout, "stored apple") {
		t.Fatalf("put: %+v", r)
	}
	r = runCLI(t, env, "get", "apple")
	if r.code != 0 || r.stdout != "red\n" {
		t.Fatalf("get: %+v", r)
	}
	r = runCLI(t, env, "get", "--json", "apple")
	var doc map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc["value"] != "red" || doc["ok"] != true {
		t.Fatalf("get --json: %v %s", err, r.stdout)
	}
	r = runCLI(t, env, "get", "pear")
	if r.code != exitNotFound || r.stdout != "" || !strings.Contains(r.stderr, "not found") {
		t.Fatalf("get absent: %+v", r)
	}
	r = runCLI(t, env, "get", "pear", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc["class"] != "not_found" || r.code != 1 {
		t.Fatalf("get absent --json: %v %+v", err, r)
	}
	r = runCLI(t, env, "--hex", "put", "00ff", "0a")
	if r.code != 0 || !strings.Contains(r.stdout, "stored 00ff") {
		t.Fatalf("put --hex: %+v", r)
	}
	r = runCLI(t, env, "get", "--hex", "00ff")
	if r.code != 0 || r.stdout != "0a\n" {
		t.Fatalf("get --hex: %+v", r)
	}
	r = runCLI(t, env, "del", "apple")
	if r.code != 0 || !strings.Contains(r.stdout, "deleted apple") {
		t.Fatalf("del: %+v", r)
	}
	if r = runCLI(t, env, "del", "apple"); r.code != exitNotFound {
		t.Fatalf("del absent: %+v", r)
	}
	// A key that starts with '-' after "--".
	if r = runCLI(t, env, "put", "--", "-dash", "v"); r.code != 0 {
		t.Fatalf("put -- -dash: %+v", r)
	}
	if r = runCLI(t, env, "get", "--", "-dash"); r.code != 0 || r.stdout != "v\n" {
		t.Fatalf("get -- -dash: %+v", r)
	}
}

func TestScanPrefixCommands(t *testing.T) {
	n := clienttest.NewNode(t)
	n.ScanMax = 2 // force continuations
	for _, k := range []string{"a", "ab", "abc", "b", "c", "two words"} {
		n.Put(k, "v-"+k)
	}
	env := map[string]string{"SKIPCTL_PEER": n.Multiaddr()}

	r := runCLI(t, env, "scan", "a", "c")
	if r.code != 0 || r.stdout != "a\tv-a\nab\tv-ab\nabc\tv-abc\nb\tv-b\n" || !strings.Contains(r.stderr, "4 items from 1 node") {
		t.Fatalf("scan: %+v", r)
	}
	r = runCLI(t, env, "scan", "a", "", "--limit", "3")
	if r.code != 0 || strings.Count(r.stdout, "\n") != 3 || !strings.Contains(r.stderr, "more from b: skipctl scan b \"\"") {
		t.Fatalf("scan --limit: %+v", r)
	}
	r = runCLI(t, env, "scan", "t", "t", "--limit", "0")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "\"two words\"\t\"v-two words\"\n") || strings.Count(r.stdout, "\n") != 6 {
		t.Fatalf("scan whole circle: %+v", r)
	}
	r = runCLI(t, env, "prefix", "ab", "--json")
	var doc struct {
		OK     bool       `json:"ok"`
		Prefix string     `json:"prefix"`
		Count  int        `json:"count"`
		Items  []jsonItem `json:"items"`
		More   bool       `json:"more"`
		Range  jsonRange  `json:"range"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.code != 0 {
		t.Fatalf("prefix --json: %v %+v", err, r)
	}
	if !doc.OK || doc.Count != 2 || doc.Items[1].Key != "abc" || doc.More || doc.Range.End != "ac" || doc.Prefix != "ab" {
		t.Errorf("prefix doc %+v", doc)
	}

	// A scan over a range partly lost: the items, a warning, exit 1.
	n.Set(func(n *clienttest.Node) {
		n.Handle = func(req *pb.ClientRequest) *pb.ClientReply {
			if req.GetOp() == pb.ClientOp_CLIENT_OP_SCAN {
				return &pb.ClientReply{Items: []*pb.Item{{Key: []byte("a"), Value: []byte("1")}}, Incomplete: true}
			}
			return nil
		}
	})
	r = runCLI(t, env, "scan", "a", "z")
	if r.code != exitNotFound || r.stdout != "a\t1\n" || !strings.Contains(r.stderr, "lost with a failed node") {
		t.Fatalf("incomplete scan: %+v", r)
	}
	r = runCLI(t, env, "scan", "a", "z", "--json") // one document, the scan's
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.code != exitNotFound {
		t.Fatalf("incomplete scan --json: %v %+v", err, r)
	}
}

func TestErrorExitCodes(t *testing.T) {
	n := clienttest.NewNode(t)
	n.Handle = func(req *pb.ClientRequest) *pb.ClientReply {
		switch string(req.GetKey()) {
		case "lost":
			return &pb.ClientReply{Status: pb.Status_STATUS_LOST}
		case "broken":
			return &pb.ClientReply{Status: pb.Status_STATUS_ERROR, Error: "owner unreachable"}
		}
		return nil
	}
	env := map[string]string{"SKIPCTL_PEER": n.Multiaddr()}
	if r := runCLI(t, env, "get", "lost"); r.code != exitNotFound || !strings.Contains(r.stderr, "lost with a failed node") {
		t.Errorf("lost: %+v", r)
	}
	r := runCLI(t, env, "put", "broken", "x", "--json")
	var doc map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.code != exitOverlay || doc["class"] != "overlay" ||
		!strings.Contains(r.stderr, "owner unreachable") {
		t.Errorf("overlay error: %v %+v", err, r)
	}

	dead := clienttest.NewNode(t)
	addr := dead.Multiaddr()
	_ = dead.Host.Close()
	if r := runCLI(t, nil, "--peer", addr, "status"); r.code != exitUnreachable || !strings.Contains(r.stderr, "unreachable") {
		t.Errorf("unreachable: %+v", r)
	}
	if r := runCLI(t, nil, "--peer", addr, "bench", "--duration", "100ms"); r.code != exitUnreachable {
		t.Errorf("bench against a dead node: %+v", r)
	}
}

func TestStatusAndRingCommands(t *testing.T) {
	nodes := []*clienttest.Node{clienttest.NewNode(t), clienttest.NewNode(t), clienttest.NewNode(t)}
	bounds := []string{"", "h", "q"}
	for i, nd := range nodes {
		nd.SetStatus(&pb.NodeStatus{
			State:  "active",
			Range:  &pb.KeyRange{Start: []byte(bounds[i]), End: []byte(bounds[(i+1)%3])},
			Items:  uint64(i * 10),
			Load:   float64(i * 6),
			Thres:  10,
			Levels: []*pb.LevelLinks{{Pred: nodes[(i+2)%3].Ref(), Succ: nodes[(i+1)%3].Ref()}},
		})
	}
	env := map[string]string{"SKIPCTL_PEER": nodes[0].Multiaddr()}
	r := runCLI(t, env, "status")
	if r.code != 0 || !strings.Contains(r.stdout, `range      ["" .. h)`) || !strings.Contains(r.stdout, "lock       free") {
		t.Fatalf("status: %+v", r)
	}
	r = runCLI(t, env, "ring")
	if r.code != 0 || !strings.Contains(r.stdout, "nodes 3   items 30") || !strings.Contains(r.stdout, "12.0*") ||
		!strings.Contains(r.stdout, "ring closed: every successor") {
		t.Fatalf("ring: %+v", r)
	}
	r = runCLI(t, env, "ring", "--json")
	var doc struct {
		OK     bool       `json:"ok"`
		Closed bool       `json:"closed"`
		Nodes  []jsonNode `json:"nodes"`
		Totals ringTotals `json:"totals"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || !doc.OK || !doc.Closed || len(doc.Nodes) != 3 || doc.Totals.Overloaded != 1 {
		t.Fatalf("ring --json: %v %+v", err, r)
	}
	// Break the ring: the last node's successor is dead.
	dead := clienttest.NewNode(t)
	ref := dead.Ref()
	_ = dead.Host.Close()
	nodes[2].UpdateStatus(func(s *pb.NodeStatus) { s.Levels[0].Succ = ref })
	r = runCLI(t, env, "ring")
	if r.code != exitUnreachable || !strings.Contains(r.stdout, "ring NOT closed") || !strings.Contains(r.stderr, "ring is not closed") {
		t.Fatalf("broken ring: %+v", r)
	}
	r = runCLI(t, env, "ring", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.code != exitUnreachable || doc.OK || doc.Closed || len(doc.Nodes) != 3 {
		t.Fatalf("broken ring --json: %v %+v", err, r)
	}
}

func TestBenchCommand(t *testing.T) {
	n := clienttest.NewNode(t)
	n.MaxItems = 30 // batches of 50 are refused: bench halves them
	env := map[string]string{"SKIPCTL_PEER": n.Multiaddr()}
	r := runCLI(t, env, "bench", "--keys", "200", "--load", "--batch", "50", "--rate", "300", "--duration", "600ms",
		"--concurrency", "4", "--reads", "0.5", "--scan", "0.2", "--json", "--quiet")
	if r.code != 0 {
		t.Fatalf("bench: %+v", r)
	}
	var rep benchReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, r.stdout)
	}
	if rep.Load == nil || rep.Load.Items != 200 || rep.Load.Batches != 4 || n.Len() != 200 {
		t.Errorf("load: %+v, node has %d", rep.Load, n.Len())
	}
	if rep.Ops < 50 || rep.Errors != 0 || rep.PerOp["get"].Count == 0 || rep.PerOp["put"].Count == 0 || rep.PerOp["scan"].Count == 0 {
		t.Errorf("report: %+v", rep)
	}
	if g := rep.PerOp["get"]; g.Miss != 0 || g.P50ms <= 0 || g.P99ms < g.P50ms || g.Maxms < g.P99ms {
		t.Errorf("get stats %+v", g)
	}
	if rep.PerOp["scan"].Items == 0 {
		t.Error("scans returned nothing")
	}

	// Closed loop, words workload, human output with progress.
	dir := t.TempDir()
	words := filepath.Join(dir, "words.txt")
	if err := os.WriteFile(words, []byte("the 50\nthen 10\nthere 20\nand 30\nant 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, env, "bench", "--workload", "words", "--words", words, "--prefix", "2", "--load", "--rate", "0",
		"--duration", "1100ms", "--concurrency", "2", "--scan", "0.5")
	if r.code != 0 || !strings.Contains(r.stdout, "words(5, prefix 2)") || !strings.Contains(r.stdout, "as fast as possible") ||
		!strings.Contains(r.stderr, "bench:") || !strings.Contains(r.stdout, "scan") {
		t.Fatalf("bench words: %+v", r)
	}
}
