package local

import (
	"testing"
	"time"
)

// TestBalanceWatch: balance counts only on reads with every node under thres and no piece in
// flight, two in a row, and dates from the first of them.
func TestBalanceWatch(t *testing.T) {
	const thres = 50
	under := []NodeLoad{{Start: "a", Load: 40}, {Start: "b", Load: 50}}
	over := []NodeLoad{{Start: "a", Load: 40}, {Start: "b", Load: 51}}
	// A piece in flight: its load is counted at neither node, so the loads look balanced.
	handing := []NodeLoad{{Start: "a", Load: 40, Handing: true}, {Start: "b", Load: 10}}
	s := time.Second
	steps := []struct {
		name  string
		at    time.Duration
		ring  []NodeLoad
		since time.Duration
		ok    bool
	}{
		{"empty ring", 0, nil, 0, false},
		{"first balanced read", 1 * s, under, 0, false},
		{"over thres", 2 * s, over, 0, false},
		{"balanced again", 3 * s, under, 0, false},
		{"piece in flight", 4 * s, handing, 0, false},
		{"first read after it", 5 * s, under, 0, false},
		{"second read in a row", 6 * s, under, 5 * s, true},
		{"third read keeps the date", 7 * s, under, 5 * s, true},
	}
	var w BalanceWatch
	for _, st := range steps {
		since, ok := w.Observe(st.at, st.ring, thres)
		if ok != st.ok || (ok && since != st.since) {
			t.Fatalf("%s: Observe = (%v, %v), want (%v, %v)", st.name, since, ok, st.since, st.ok)
		}
	}
}
