package p2p

import (
	"fmt"
	"time"

	"github.com/skiprange/skiprange/node"
	"github.com/skiprange/skiprange/skipgraph"
)

// DefaultNodeConfig returns protocol parameters for real networks: the simulator's defaults with
// message sizes bounded so that every message fits in one frame, and timings for a LAN or data
// centre (a hop takes milliseconds, not the simulator's second).
func DefaultNodeConfig() node.Config {
	c := node.DefaultConfig()
	sg := &c.SkipGraph
	sg.MaxKeyLen = 1 << 10
	sg.MaxValueLen = 64 << 10
	sg.ChunkItems = 256
	sg.MaxItemsPerMessage = 400
	sg.MaxKeyLoads = 16 << 10
	// The snapshot holds every tombstone and is written again whenever one changes: bounded so
	// that a burst of deletes in a lost range rewrites kilobytes, not megabytes, each.
	sg.MaxTombstones = 10_000
	sg.ProbeInterval = 2 * time.Second
	sg.ProbeTimeout = 2 * time.Second
	sg.RefreshInterval = 10 * time.Second
	sg.RequestTimeout = 5 * time.Second
	sg.JoinTimeout = 3 * time.Second // a lost join request (a dial to a restarted peer failed) is retried soon
	sg.JoinBackoff = 500 * time.Millisecond
	sg.HandoffLease = 15 * time.Second
	sg.HandoffRetry = 2 * time.Second
	sg.Linger = 30 * time.Second
	b := &c.Balance
	b.HopTime = 50 * time.Millisecond
	b.Lease = 10 * time.Second
	return c
}

// frameOverhead bounds what a message carries besides its items: descriptors, routes, hints.
const frameOverhead = 1 << 20

// checkFits refuses a configuration under which a well-formed message could exceed
// MaxFrameSize: its peers would reset every stream that carried one.
func checkFits(c node.Config) error {
	sg := c.SkipGraph
	perItem := sg.MaxKeyLen + sg.MaxValueLen + 16
	worst := perItem*max(sg.ChunkItems, sg.MaxItemsPerMessage) + frameOverhead
	if worst > MaxFrameSize {
		return fmt.Errorf("config: %d items of up to %d+%d bytes make messages of %d bytes, above the %d-byte frame limit: lower the item limits",
			max(sg.ChunkItems, sg.MaxItemsPerMessage), sg.MaxKeyLen, sg.MaxValueLen, worst, MaxFrameSize)
	}
	// A handoff commit carries up to MaxKeyLoads key statistics of MaxLoadSlots counters each.
	perLoad := sg.MaxKeyLen + 16 + 5*skipgraph.MaxLoadSlots
	if commit := perLoad*sg.MaxKeyLoads + frameOverhead; commit > MaxFrameSize {
		return fmt.Errorf("config: %d key loads of up to %d bytes make handoff commits of %d bytes, above the %d-byte frame limit: lower MaxKeyLoads or MaxKeyLen",
			sg.MaxKeyLoads, perLoad, commit, MaxFrameSize)
	}
	return nil
}
