package sim

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/skiprange/skiprange/overlay"
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
	checkRounds(t, 20261130, 3, (*propertyNet).pause)
}

// pause freezes drawn owners for a drawn time (with a burst of joins, leaves and crashes inside,
// at times) and resumes them.
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
	p.faultFor(t, d, "resumed", func() {
		for _, id := range paused {
			if p.h.Net.Paused(id) { // not crashed by the burst
				if err := p.h.Net.Resume(id); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}
