package skipgraph

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

var errNoRoute = errors.New("missing route")

// validate checks a message's fields before any of them is used: sizes, levels, required parts.
// A message that fails is rejected and counted, never acted on.
func (n *Node) validate(m *pb.Envelope) error {
	if m == nil || m.Body == nil {
		return errors.New("empty message")
	}
	if err := n.checkRef(m.From); err != nil {
		return fmt.Errorf("sender: %w", err)
	}
	if m.Clock > maxClock {
		return fmt.Errorf("clock %d over the limit of %d", m.Clock, uint64(maxClock))
	}
	if m.Cause < 0 || int(m.Cause) >= NumCauses {
		// The cause indexes Stats.Sent when the message is forwarded.
		return fmt.Errorf("unknown cause %d", m.Cause)
	}
	switch b := m.Body.(type) {
	case *pb.Envelope_Lookup:
		if err := n.checkRoute(b.Lookup.Route); err != nil {
			return err
		}
		if len(b.Lookup.Value) > n.cfg.MaxValueLen {
			return fmt.Errorf("value of %d bytes over the limit", len(b.Lookup.Value))
		}
		if err := n.checkStamps([]uint64{b.Lookup.Issued}); err != nil {
			return err
		}
		return n.checkRef(b.Lookup.Origin)
	case *pb.Envelope_RangeQuery:
		q := b.RangeQuery
		if err := n.checkRoute(q.Route); err != nil {
			return err
		}
		if len(q.Start) > n.cfg.MaxKeyLen || len(q.End) > n.cfg.MaxKeyLen {
			return errors.New("range bound over the key limit")
		}
		if err := n.checkItems(q.Items); err != nil {
			return err
		}
		return n.checkRef(q.Origin)
	case *pb.Envelope_BatchPut:
		if err := n.checkRoute(b.BatchPut.Route); err != nil {
			return err
		}
		if len(b.BatchPut.Items) == 0 && len(b.BatchPut.Deletes) == 0 {
			return errors.New("empty batch")
		}
		if err := n.checkItems(b.BatchPut.Items); err != nil {
			return err
		}
		if len(b.BatchPut.Items)+len(b.BatchPut.Deletes) > n.cfg.MaxItemsPerMessage {
			return errors.New("too many items and deletes in a batch")
		}
		for _, k := range b.BatchPut.Deletes {
			if len(k) > n.cfg.MaxKeyLen {
				return errors.New("deleted key over the limit")
			}
		}
		if len(b.BatchPut.DeletesWritten) > len(b.BatchPut.Deletes) {
			return errors.New("more delete stamps than deletes")
		}
		if err := n.checkStamps(b.BatchPut.DeletesWritten); err != nil {
			return err
		}
		if err := n.checkStamps([]uint64{b.BatchPut.Issued, b.BatchPut.Superseded}); err != nil {
			return err
		}
		if c := b.BatchPut.Covers; c != nil && (!b.BatchPut.Copies || len(c.Start) > n.cfg.MaxKeyLen || len(c.End) > n.cfg.MaxKeyLen) {
			return errors.New("covers on a batch that is not of copies, or over the key limit")
		}
		if b.BatchPut.Copies && b.BatchPut.Issued != 0 {
			return errors.New("an issue stamp on a batch of copies (they keep their own stamps)")
		}
		if !b.BatchPut.Copies && (b.BatchPut.KeepExisting || b.BatchPut.CopiesOfXfer != 0) {
			return errors.New("keep_existing or copies_of_xfer on a batch that is not of copies")
		}
		return n.checkRef(b.BatchPut.Origin)
	case *pb.Envelope_JoinRequest:
		if err := n.checkRoute(b.JoinRequest.Route); err != nil {
			return err
		}
		return n.checkRef(b.JoinRequest.Joiner)
	case *pb.Envelope_Handoff:
		h := b.Handoff
		if len(h.Start) > n.cfg.MaxKeyLen || len(h.End) > n.cfg.MaxKeyLen {
			return errors.New("handoff bound over the key limit")
		}
		if len(h.SuccList) > 4*n.cfg.SuccessorListLen {
			return errors.New("successor list too long")
		}
		for _, k := range h.Deletes {
			if len(k) > n.cfg.MaxKeyLen {
				return errors.New("deleted key over the limit")
			}
		}
		if len(h.DeletesWritten) > len(h.Deletes) {
			return errors.New("more delete stamps than deletes")
		}
		if err := n.checkStamps(h.DeletesWritten); err != nil {
			return err
		}
		if len(h.Lost) > n.cfg.MaxItemsPerMessage {
			return errors.New("too many lost ranges")
		}
		for _, r := range h.Lost {
			if r == nil || len(r.Start) > n.cfg.MaxKeyLen || len(r.End) > n.cfg.MaxKeyLen {
				return errors.New("lost range missing or over the key limit")
			}
		}
		if len(h.LostAgesNanos) > len(h.Lost) {
			return errors.New("more lost ranges' ages than lost ranges")
		}
		if len(h.Tombstones) > n.cfg.MaxItemsPerMessage || len(h.RecentDeletes) > n.cfg.MaxItemsPerMessage {
			return errors.New("too many tombstones or recent deletes")
		}
		piece := overlay.Range{Start: overlay.Key(h.Start), End: overlay.Key(h.End)}
		for _, t := range slices.Concat(h.Tombstones, h.RecentDeletes) {
			if t == nil || len(t.Key) > n.cfg.MaxKeyLen || !piece.Contains(overlay.Key(t.Key)) {
				return errors.New("tombstone missing, over the key limit or outside the piece")
			}
			if err := n.checkStamps([]uint64{t.Written}); err != nil {
				return err
			}
		}
		if h.Pred != nil {
			if err := n.checkRef(h.Pred); err != nil {
				return fmt.Errorf("handoff predecessor: %w", err)
			}
		}
		return n.checkItems(h.Items)
	case *pb.Envelope_HandoffCommit:
		if len(b.HandoffCommit.Loads) > n.cfg.MaxKeyLoads {
			return errors.New("too many key loads")
		}
		for _, l := range b.HandoffCommit.Loads {
			if l == nil || len(l.Key) == 0 || len(l.Key) > n.cfg.MaxKeyLen || len(l.Counts) > MaxLoadSlots {
				return errors.New("key load missing or over the limits")
			}
		}
	case *pb.Envelope_CopiesWhole:
		c := b.CopiesWhole
		if err := n.checkRoute(c.Route); err != nil {
			return err
		}
		if len(c.Holes) > n.cfg.MaxItemsPerMessage {
			return errors.New("too many holes")
		}
		if c.Hops > maxCopiesWholeHops {
			return fmt.Errorf("%d hops over the limit of %d", c.Hops, maxCopiesWholeHops)
		}
		for _, r := range append([]*pb.KeyRange{c.Range}, c.Holes...) {
			if r == nil || len(r.Start) > n.cfg.MaxKeyLen || len(r.End) > n.cfg.MaxKeyLen {
				return errors.New("range missing or over the key limit")
			}
		}
		if c.Origin != nil {
			if err := n.checkRef(c.Origin); err != nil {
				return fmt.Errorf("copies' origin: %w", err)
			}
		}
	case *pb.Envelope_NeighborUpdate:
		if b.NeighborUpdate.Level >= overlay.MaxLevel {
			return fmt.Errorf("level %d out of range", b.NeighborUpdate.Level)
		}
		if b.NeighborUpdate.Side == pb.Side_SIDE_UNSPECIFIED {
			return errors.New("neighbour update without side")
		}
		return n.checkRef(b.NeighborUpdate.Node)
	case *pb.Envelope_LevelScan:
		s := b.LevelScan
		if s.Level == 0 || s.Level >= overlay.MaxLevel {
			return fmt.Errorf("scan level %d out of range", s.Level)
		}
		if s.Side == pb.Side_SIDE_UNSPECIFIED {
			return errors.New("scan without side")
		}
		return n.checkRef(s.Origin)
	case *pb.Envelope_LevelFound:
		if b.LevelFound.Level == 0 || b.LevelFound.Level >= overlay.MaxLevel {
			return fmt.Errorf("level %d out of range", b.LevelFound.Level)
		}
		if !b.LevelFound.Alone {
			if err := n.checkRef(b.LevelFound.Node); err != nil {
				return err
			}
		}
	case *pb.Envelope_LookupReply:
		// The origin issues a superseded write again past the stamp named (reissue).
		return n.checkStamps([]uint64{b.LookupReply.Superseded})
	case *pb.Envelope_BatchPutReply:
		return n.checkStamps([]uint64{b.BatchPutReply.Superseded})
	case *pb.Envelope_Ping:
		if b.Ping.Level >= overlay.MaxLevel {
			return fmt.Errorf("ping level %d out of range", b.Ping.Level)
		}
	case *pb.Envelope_Pong:
		if b.Pong.PredAnswered && b.Pong.Pred == nil {
			return errors.New("indirect ping answer without the node that answered")
		}
		if len(b.Pong.SuccList) > 4*n.cfg.SuccessorListLen {
			return errors.New("successor list too long")
		}
		if len(b.Pong.Preds) > overlay.MaxLevel || len(b.Pong.Succs) > overlay.MaxLevel {
			return errors.New("level table too long")
		}
		if len(b.Pong.Beyond) > 4*n.cfg.SuccessorListLen {
			return errors.New("too many successor tables")
		}
		if len(b.Pong.CopiesUnanswered) > maxCopiesListed {
			return errors.New("too many unanswered batches listed")
		}
		for _, t := range b.Pong.Beyond {
			if t == nil || len(t.Preds) > overlay.MaxLevel || len(t.Succs) > overlay.MaxLevel {
				return errors.New("successor table missing or too long")
			}
			if err := n.checkRef(t.Node); err != nil {
				return fmt.Errorf("successor table: %w", err)
			}
		}
	}
	return nil
}

func (n *Node) checkRef(r *pb.NodeRef) error {
	switch {
	case r == nil || len(r.Id) == 0:
		return errors.New("missing node reference")
	case len(r.Start) > n.cfg.MaxKeyLen:
		return errors.New("node start over the key limit")
	}
	return nil
}

func (n *Node) checkRoute(r *pb.Route) error {
	switch {
	case r == nil:
		return errNoRoute
	case len(r.Key) > n.cfg.MaxKeyLen || len(r.PrevStart) > n.cfg.MaxKeyLen:
		return errors.New("routed key over the limit")
	case len(r.Hints) > MaxHints:
		return fmt.Errorf("%d load hints over the limit of %d", len(r.Hints), MaxHints)
	}
	for _, h := range r.Hints {
		if h == nil {
			return errors.New("empty load hint")
		}
		if err := n.checkRef(h.Node); err != nil {
			return fmt.Errorf("load hint: %w", err)
		}
	}
	return nil
}

// MaxLoadSlots bounds the time slots of one key's load statistics.
const MaxLoadSlots = 64

// MaxHints bounds the load hints a routed message may carry.
const MaxHints = 8

func (n *Node) checkItems(items []*pb.Item) error {
	if len(items) > n.cfg.MaxItemsPerMessage {
		return fmt.Errorf("%d items over the limit of %d", len(items), n.cfg.MaxItemsPerMessage)
	}
	for _, it := range items {
		if it == nil || len(it.Key) > n.cfg.MaxKeyLen || len(it.Value) > n.cfg.MaxValueLen {
			return errors.New("item missing or over the size limits")
		}
		if err := n.checkStamps([]uint64{it.Written}); err != nil {
			return err
		}
	}
	return nil
}

// maxStampAhead bounds how far ahead of this node's clock a received write stamp may be. A copy
// stamped further ahead would beat every write of its key made here for that long (and one near
// the top of the range would wrap the stamp clock); honest clocks agree far better.
const maxStampAhead = 10 * time.Minute

// checkStamps refuses write stamps beyond maxStampAhead of this node's clock.
func (n *Node) checkStamps(stamps []uint64) error {
	limit := uint64(n.env.Now().Add(maxStampAhead).UnixNano())
	for _, s := range stamps {
		if s > limit {
			return fmt.Errorf("write stamp %d more than %s ahead of this node's clock", s, maxStampAhead)
		}
	}
	return nil
}

// maxClock bounds a received Lamport clock: a peer cannot push clocks to where stamping
// (one more per range change) would wrap around. No honest clock gets near it.
const maxClock = 1 << 62
