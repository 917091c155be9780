package sim

import (
	"time"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// event is one scheduled delivery: a message, a timer, or a call into the network.
type event struct {
	at          time.Duration
	seq         uint64
	to          *simNode
	incarnation uint32
	from        overlay.NodeID
	msg         *pb.Envelope // nil for timers and calls
	timer       overlay.Timer
	call        func()
}

// queue is a binary min-heap of events ordered by (at, seq): ties go in scheduling order, which
// keeps runs deterministic.
type queue []event

func (q queue) less(i, j int) bool {
	return q[i].at < q[j].at || (q[i].at == q[j].at && q[i].seq < q[j].seq)
}

func (q *queue) push(e event) {
	*q = append(*q, e)
	h := *q
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *queue) pop() event {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h[last] = event{}
	h = h[:last]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && h.less(l, m) {
			m = l
		}
		if r < len(h) && h.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}

// fifo holds events that are scheduled in time order anyway — messages under a fixed latency — so
// that they skip the heap. It is a slice consumed from the front.
type fifo struct {
	events []event
	head   int
}

func (f *fifo) len() int { return len(f.events) - f.head }

func (f *fifo) push(e event) { f.events = append(f.events, e) }

func (f *fifo) peek() *event { return &f.events[f.head] }

func (f *fifo) pop() event {
	e := f.events[f.head]
	f.events[f.head] = event{}
	f.head++
	if f.head > 4096 && f.head*2 > len(f.events) {
		// Reclaim the consumed front.
		n := copy(f.events, f.events[f.head:])
		clear(f.events[n:])
		f.events = f.events[:n]
		f.head = 0
	}
	return e
}

// schedule is the network's agenda: a heap for timers, calls and jittered messages, and a FIFO
// for messages under a fixed latency. The next event is the earlier of the two heads, ties going
// to the one scheduled first.
type schedule struct {
	heap queue
	fifo fifo
}

func (s *schedule) len() int { return len(s.heap) + s.fifo.len() }

// next returns the earliest event without removing it (the schedule must not be empty).
func (s *schedule) next() *event {
	switch {
	case s.fifo.len() == 0:
		return &s.heap[0]
	case len(s.heap) == 0:
		return s.fifo.peek()
	}
	f, h := s.fifo.peek(), &s.heap[0]
	if f.at < h.at || (f.at == h.at && f.seq < h.seq) {
		return f
	}
	return h
}

func (s *schedule) pop() event {
	if e := s.next(); s.fifo.len() > 0 && e == s.fifo.peek() {
		return s.fifo.pop()
	}
	return s.heap.pop()
}
