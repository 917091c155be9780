package skipgraph

import (
	"fmt"
	"time"
)

// Config holds a node's protocol parameters. DefaultConfig gives the values used unless a runtime
// or operator says otherwise; times are in the runtime's clock (one hop = one second in the
// simulator, as in the thesis).
type Config struct {
	// ProbeInterval is the period of level-0 pings.
	ProbeInterval time.Duration
	// RefreshInterval is the least time between two refresh passes over the higher levels.
	RefreshInterval time.Duration
	// ProbeTimeout is how long a ping waits for its pong.
	ProbeTimeout time.Duration
	// ProbeMisses consecutive unanswered pings make a neighbour dead.
	ProbeMisses int
	// SuccessorListLen is how many level-0 successors a node remembers to close the ring over
	// failed nodes.
	SuccessorListLen int
	// RequestTimeout bounds one attempt of a client request; RequestAttempts attempts are made.
	RequestTimeout  time.Duration
	RequestAttempts int
	// JoinTimeout bounds one join attempt; JoinBackoff is the base of the retry delay.
	JoinTimeout time.Duration
	JoinBackoff time.Duration
	// HandoffLease bounds a handoff before its acknowledgement; after it the transfer aborts and
	// both sides are free again. HandoffRetry is the period of commit retransmission.
	HandoffLease time.Duration
	HandoffRetry time.Duration
	// ChunkItems is the most items one handoff chunk carries.
	ChunkItems int
	// Linger is how long a node that left keeps forwarding messages to the node that took its
	// range.
	Linger time.Duration
	// MaxHops bounds the hops of a routed message.
	MaxHops uint32
	// MaxKeyLen and MaxValueLen bound item sizes accepted from clients and peers.
	MaxKeyLen   int
	MaxValueLen int
	// MaxItemsPerMessage bounds the items in one batch, range answer or chunk.
	MaxItemsPerMessage int
	// MaxKeyLoads bounds the per-key load statistics one handoff commit carries. A piece with
	// more loaded keys sends the heaviest; the others' statistics start afresh at the receiver.
	MaxKeyLoads int
	// TombstoneTTL is how long a delete made in a lost part of the range (or in a piece whose
	// copies may come back) is remembered, and MaxTombstones how many such deletes are (the
	// oldest go first): longer than the longest outage whose copies may come back
	// (tombstone.go).
	TombstoneTTL  time.Duration
	MaxTombstones int
}

// DefaultConfig returns the default parameters.
func DefaultConfig() Config {
	return Config{
		ProbeInterval:      5 * time.Second,
		RefreshInterval:    20 * time.Second,
		ProbeTimeout:       3 * time.Second,
		ProbeMisses:        3,
		SuccessorListLen:   4,
		RequestTimeout:     30 * time.Second,
		RequestAttempts:    3,
		JoinTimeout:        60 * time.Second,
		JoinBackoff:        2 * time.Second,
		HandoffLease:       30 * time.Second,
		HandoffRetry:       5 * time.Second,
		ChunkItems:         512,
		Linger:             30 * time.Second,
		MaxHops:            4096,
		MaxKeyLen:          4096,
		MaxValueLen:        1 << 20,
		MaxItemsPerMessage: 100_000,
		MaxKeyLoads:        100_000,
		TombstoneTTL:       24 * time.Hour,
		MaxTombstones:      100_000,
	}
}

// Validate reports the first unusable parameter.
func (c Config) Validate() error {
	switch {
	case c.ProbeInterval <= 0 || c.ProbeTimeout <= 0:
		return fmt.Errorf("probe interval and timeout must be positive")
	case c.RefreshInterval < 0:
		return fmt.Errorf("refresh interval must not be negative")
	case c.ProbeMisses < 1:
		return fmt.Errorf("probe misses must be at least 1")
	case c.SuccessorListLen < 1:
		return fmt.Errorf("successor list length must be at least 1")
	case c.RequestTimeout <= 0 || c.RequestAttempts < 1:
		return fmt.Errorf("request timeout must be positive and attempts at least 1")
	case c.JoinTimeout <= 0 || c.JoinBackoff <= 0:
		return fmt.Errorf("join timeout and back-off must be positive")
	case c.HandoffLease <= 0 || c.HandoffRetry <= 0:
		return fmt.Errorf("handoff lease and retry must be positive")
	case c.ChunkItems < 1 || c.MaxItemsPerMessage < c.ChunkItems:
		return fmt.Errorf("chunk items must be at least 1 and at most the per-message limit")
	case c.MaxHops < 8:
		return fmt.Errorf("max hops must be at least 8")
	case c.MaxKeyLen < 1 || c.MaxValueLen < 0:
		return fmt.Errorf("key and value limits must be positive")
	case c.MaxKeyLoads < 0:
		return fmt.Errorf("max key loads must not be negative")
	case c.TombstoneTTL <= 0 || c.MaxTombstones < 1:
		return fmt.Errorf("tombstone lifetime must be positive and max tombstones at least 1")
	}
	return nil
}
