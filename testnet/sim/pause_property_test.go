package sim

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// TestPauseProperties freezes one to a third of the nodes — as a SIGSTOP or a long garbage
// collection does: nothing runs, what is sent to them waits, and when they go on every timer
// that fell due fires at once and the held messages arrive — for a drawn time: shorter than
// failure detection, or long enough for their neighbours to take their ranges over, sometimes
// with joins, leaves and crashes inside. Then it checks that the overlay becomes one ring again
// with every written key at its owner with its value (only crashes lose items). The docker
// chaos test pauses a real node so ("pause > lease"); this explores many more cases.
//
//	SKIPRANGE_RANDOM_PROPS=1 go test ./testnet/sim/ -run 'TestPauseProperties$' -rapid.checks=3000
func TestPauseProperties(t *testing.T) {
	checkProperty(t, 20261130, pauseProperty)
}

var pauseProperty = roundsProperty(3, (*propertyNet).pause)

// pause freezes drawn owners for a drawn time (with a burst of joins, leaves and crashes inside,
// or writes through the running nodes, at times) and resumes them.
func (p *propertyNet) pause(t *rapid.T) {
	ids := p.owners()
	if len(ids) < 2 {
		return
	}
	n := rapid.IntRange(1, max(1, len(ids)/3)).Draw(t, "paused")
	var paused []overlay.NodeID
	for len(paused) < n {
		ids = p.owners()
		id := p.pick(t, ids, "pause")
		if err := p.h.Net.Pause(id); err != nil {
			t.Fatal(err)
		}
		paused = append(paused, id)
		p.h.Net.RunFor(time.Duration(rapid.IntRange(0, 2).Draw(t, "stagger")) * time.Second)
	}
	hold := []time.Duration{2 * time.Second, 8 * time.Second, 20 * time.Second, 90 * time.Second, 10 * time.Minute}
	d := hold[rapid.IntRange(0, len(hold)-1).Draw(t, "hold")]
	t.Logf("t=%s paused %v for %s", p.h.Net.Now(), paused, d)
	resume := func() {
		for _, id := range paused {
			if p.h.Net.Paused(id) { // not crashed by a burst
				if err := p.h.Net.Resume(id); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if rapid.Bool().Draw(t, "writes inside") {
		// Writes while the paused nodes stand still, issued once their neighbours may have
		// taken their ranges over (no burst then: a crashed writer's requests go unanswered):
		// an acknowledged delete stays deleted after they come back, which their older copies
		// once undid (tombstones).
		p.h.Net.RunFor(d / 2)
		p.writesDuring(t, paused)
		p.h.Net.RunFor(d - d/2)
		resume()
		t.Logf("t=%s resumed", p.h.Net.Now())
		p.h.Net.RunFor(10 * time.Minute)
		return
	}
	p.faultFor(t, d, "resumed", resume)
}

// writesDuring deletes written keys, overwrites them and puts new ones through running owners,
// all at once, without waiting for the answers. A write acknowledged counts; one that failed may
// or may not have happened (a node that waits for its neighbours' word holds requests past the
// writer's timeout): its key may then hold the value it had or the one written, or be missing,
// which the harness's lost keys allow, and an overwritten key either value (p.either).
func (p *propertyNet) writesDuring(t *rapid.T, paused []overlay.NodeID) {
	var writers []overlay.NodeID
	for _, id := range p.owners() {
		if !slices.Contains(paused, id) {
			writers = append(writers, id)
		}
	}
	if len(writers) == 0 {
		return
	}
	written := slices.Sorted(maps.Keys(p.h.Expected))
	busy := map[overlay.Key]bool{}
	n := rapid.IntRange(1, 10).Draw(t, "writes inside")
	for i := 0; i < n; i++ {
		at := p.pick(t, writers, "writer")
		var k overlay.Key
		op := 0 // a put of a new key; 1 overwrites a written one, 2 and 3 delete one
		if len(written) > 0 {
			op = rapid.IntRange(0, 3).Draw(t, "op")
		}
		if op == 0 {
			k = p.key(t, "wkey")
		} else {
			k = written[rapid.IntRange(0, len(written)-1).Draw(t, "dkey")]
		}
		old, exists := p.h.Expected[k]
		if busy[k] || (op == 0 && exists) {
			continue // two writes of one key in flight could land in either order
		}
		busy[k] = true
		v, del := fmt.Sprintf("p%d", i), op >= 2
		p.h.write(at, k, v, del, func(r overlay.Result) {
			if r.Status != pb.Status_STATUS_OK && op == 1 {
				p.h.Expected[k] = v
				p.either[k] = old
				return
			}
			p.h.recordWrite(k, v, del, r)
		})
	}
}

// recordWrite takes the answer r to a put of v to k (a delete when del) into the reference. A
// write that failed may or may not have happened: its key may then hold the value it had or
// the one written, or none, which the lost keys allow for a delete, or for a put of a new key.
func (h *Harness) recordWrite(k overlay.Key, v string, del bool, r overlay.Result) {
	switch {
	case r.Status != pb.Status_STATUS_OK && del:
		h.Lost[k] = true // the value it had, or none
	case r.Status != pb.Status_STATUS_OK:
		h.Expected[k], h.Lost[k] = v, true // the value written, or none
	case del:
		delete(h.Expected, k)
		delete(h.Lost, k)
	default:
		h.Expected[k] = v
		delete(h.Lost, k)
	}
}
