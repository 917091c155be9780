package nixmig

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
	"google.golang.org/protobuf/proto"
)

// hintModel is the hint cache as SPEC §7.1 states it, written the slow, obvious way.
type hintModel struct {
	size    int
	maxAge  time.Duration
	entries []hint // ref, load, thres, succItems and at only
}

func (m *hintModel) add(r *pb.LoadHint) {
	at := r.At
	h := hint{ref: r.Node, load: r.Load, thres: r.Thres, succItems: successorItems(r), at: at}
	for i := range m.entries {
		if string(m.entries[i].ref.Id) == string(r.Node.Id) {
			if at > m.entries[i].at {
				m.entries[i] = h
			}
			return
		}
	}
	if len(m.entries) < m.size {
		m.entries = append(m.entries, h)
		return
	}
	if m.size == 0 {
		return
	}
	oldest := 0
	for i := range m.entries {
		if m.entries[i].at < m.entries[oldest].at {
			oldest = i
		}
	}
	if at > m.entries[oldest].at {
		m.entries[oldest] = h
	}
}

func (m *hintModel) best(now time.Time, skip func(overlay.NodeID) bool) (overlay.NodeID, bool) {
	m.entries = slices.DeleteFunc(m.entries, func(e hint) bool { return now.Sub(time.Unix(0, e.at)) > m.maxAge })
	pick := -1
	for i, e := range m.entries {
		if skip(overlay.NodeID(e.ref.Id)) {
			continue
		}
		if pick < 0 {
			pick = i
			continue
		}
		p := m.entries[pick]
		lighter, same := e.load/e.thres < p.load/p.thres, e.load/e.thres == p.load/p.thres
		if lighter || (same && e.succItems < p.succItems) || (same && e.succItems == p.succItems && e.at > p.at) {
			pick = i
		}
	}
	if pick < 0 {
		return "", false
	}
	id := overlay.NodeID(m.entries[pick].ref.Id)
	m.entries = slices.Delete(m.entries, pick, pick+1)
	return id, true
}

// hintList lists the entries as "id@at:load", sorted: the cache keeps no order among entries.
func hintList(entries []hint) []string {
	var out []string
	for _, e := range entries {
		out = append(out, fmt.Sprintf("%s@%d:%g/%d", e.ref.Id, e.at, e.load, e.succItems))
	}
	slices.Sort(out)
	return out
}

// TestHintCacheAgainstModel drives the cache and the model with the same random reports (report
// times unique, so that which entry is the oldest is never a tie) and picks.
func TestHintCacheAgainstModel(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		size := rng.IntN(6)
		maxAge := time.Duration(1+rng.IntN(3)) * time.Millisecond
		var c hintCache
		c.init(size, maxAge, true)
		m := &hintModel{size: size, maxAge: maxAge}
		nodes := 3 + rng.IntN(12)
		for step := range 4000 {
			// Reports arrive in any order, never two made at one instant.
			at := rng.Int64N(1000)*4000 + int64(step)
			if rng.IntN(10) == 0 {
				now := time.Unix(0, rng.Int64N(4_000_000))
				banned := overlay.NodeID(fmt.Sprintf("n%d", rng.IntN(nodes)))
				skip := func(id overlay.NodeID) bool { return id == banned }
				got, gotOK := c.best(now, skip)
				want, wantOK := m.best(now, skip)
				if gotOK != wantOK || got.ID != want {
					t.Fatalf("seed %d step %d: best = %q %v, model %q %v", seed, step, got.ID, gotOK, want, wantOK)
				}
			} else {
				ref := &pb.NodeRef{Id: []byte(fmt.Sprintf("n%d", rng.IntN(nodes))), Start: []byte{1}}
				// Few distinct loads and successor sizes, so that ties on both are common.
				r := &pb.LoadHint{Node: ref, Load: float64(rng.IntN(5)), Thres: 10, At: at}
				if items := rng.IntN(4); items < 3 {
					r.SuccessorItems = proto.Uint64(uint64(items))
				}
				c.add(r)
				m.add(r)
			}
			if got, want := hintList(c.entries), hintList(m.entries); !slices.Equal(got, want) {
				t.Fatalf("seed %d step %d: entries %v, model %v", seed, step, got, want)
			}
		}
	}
}
