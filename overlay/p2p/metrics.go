package p2p

import (
	"context"
	"encoding/binary"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// metrics exports a node's state to Prometheus. Values the node owns (load, items, protocol
// counters) are read through the loop when scraped; what the runtime sees itself (messages,
// requests, events) is counted as it happens.
type metrics struct {
	r        *Runtime
	reg      prometheus.Registerer
	own      []prometheus.Collector
	sentMsgs *prometheus.CounterVec
	recvMsgs *prometheus.CounterVec
	events   *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	hops     prometheus.Histogram
}

func newMetrics(r *Runtime, reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		r: r, reg: reg,
		sentMsgs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "skiprange", Name: "messages_sent_total", Help: "Overlay messages sent, by type."}, []string{"type"}),
		recvMsgs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "skiprange", Name: "messages_received_total", Help: "Overlay messages received, by type."}, []string{"type"}),
		events:   prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "skiprange", Name: "events_total", Help: "Protocol events reported by the node, by kind."}, []string{"kind"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "skiprange", Name: "request_seconds", Help: "Client request latency at the entry node, by operation and status.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"op", "status"}),
		hops: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "skiprange", Name: "lookup_hops", Help: "Overlay hops of client requests started at this node.",
			Buckets: prometheus.LinearBuckets(0, 1, 16),
		}),
	}
	m.own = []prometheus.Collector{m.sentMsgs, m.recvMsgs, m.events, m.latency, m.hops, nodeCollector{r}}
	for i, c := range m.own {
		if err := reg.Register(c); err != nil {
			for _, done := range m.own[:i] {
				reg.Unregister(done)
			}
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) unregister() {
	for _, c := range m.own {
		m.reg.Unregister(c)
	}
}

func (m *metrics) sent(kind string)     { m.sentMsgs.WithLabelValues(kind).Inc() }
func (m *metrics) received(kind string) { m.recvMsgs.WithLabelValues(kind).Inc() }

func (m *metrics) event(k overlay.EventKind) {
	name := map[overlay.EventKind]string{
		overlay.EventRangeLost: "range_lost", overlay.EventInvalidMessage: "invalid_message", overlay.EventJoined: "joined",
		overlay.EventLeft: "left", overlay.EventConflict: "conflict",
	}[k]
	if name == "" {
		name = "other"
	}
	m.events.WithLabelValues(name).Inc()
}

func (m *metrics) served(op pb.ClientOp, rep *pb.ClientReply, took time.Duration) {
	m.latency.WithLabelValues(op.String(), rep.Status.String()).Observe(took.Seconds())
	if op != pb.ClientOp_CLIENT_OP_STATUS && rep.Status != pb.Status_STATUS_ERROR {
		m.hops.Observe(float64(rep.Hops))
	}
}

var (
	descLoad      = prometheus.NewDesc("skiprange_node_load", "The node's load: requests served in the sliding window.", nil, nil)
	descThres     = prometheus.NewDesc("skiprange_node_thres", "The load above which the node is overloaded.", nil, nil)
	descItems     = prometheus.NewDesc("skiprange_node_items", "Items the node stores.", nil, nil)
	descRange     = prometheus.NewDesc("skiprange_node_range_fraction", "Share of the key circle the node owns (by the first 8 key bytes).", nil, nil)
	descLocked    = prometheus.NewDesc("skiprange_node_locked", "1 while a balancing wave holds the node's lock.", nil, nil)
	descLostRange = prometheus.NewDesc("skiprange_node_lost_ranges", "Parts of the node's range whose items were lost with failed nodes.", nil, nil)
	descTombs     = prometheus.NewDesc("skiprange_node_tombstones", "Keys deleted in the node's lost ranges or in pieces it handed off lately, remembered so that older copies do not bring them back.", nil, nil)
	descCounter   = prometheus.NewDesc("skiprange_node_counter_total", "The node's protocol counters (handoffs, items moved, waves, NIX, MIG, locks, frames), by name.", []string{"name"}, nil)
)

// nodeCollector reads the node's state through its loop at scrape time.
type nodeCollector struct{ r *Runtime }

func (c nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLoad, descThres, descItems, descRange, descLocked, descLostRange, descTombs, descCounter} {
		ch <- d
	}
}

func (c nodeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var st *pb.NodeStatus
	if c.r.call(ctx, func() error { st = c.r.status(); return nil }) != nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	gauge(descLoad, st.Load)
	gauge(descThres, st.Thres)
	gauge(descItems, float64(st.Items))
	gauge(descRange, rangeFraction(st.Range))
	locked := 0.0
	if st.Locked {
		locked = 1
	}
	gauge(descLocked, locked)
	gauge(descLostRange, float64(len(st.Lost)))
	gauge(descTombs, float64(st.Tombstones))
	for name, v := range st.Counters {
		ch <- prometheus.MustNewConstMetric(descCounter, prometheus.CounterValue, float64(v), name)
	}
}

// rangeFraction estimates the share of the key circle r covers from its keys' first 8 bytes.
func rangeFraction(r *pb.KeyRange) float64 {
	if r == nil {
		return 0
	}
	if string(r.Start) == string(r.End) {
		return 1
	}
	width := prefix64(r.End) - prefix64(r.Start) // wraps around the circle by itself
	if width == 0 {
		// The ends share their first 8 bytes: the arc is a sliver, or, when it wraps (a
		// neighbour owns the sliver), all of the circle but a sliver.
		if string(r.Start) > string(r.End) {
			return 1
		}
		return 1 / math.Exp2(64) // shorter than 8 bytes can tell
	}
	return float64(width) / math.Exp2(64)
}

func prefix64(k []byte) uint64 {
	var b [8]byte
	copy(b[:], k)
	return binary.BigEndian.Uint64(b[:])
}
