package sim

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/skiprange/skiprange/node"
	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// ClientStats is what the checked clients of a balancing run did (BalanceParams.Clients).
type ClientStats struct {
	Reads  int `json:"reads"`
	Writes int `json:"writes"`
	// Lost: reads answered STATUS_LOST (allowed only in a run with crashes or pauses: a range
	// taken over from a frozen node answers so until the node is re-admitted).
	Lost int `json:"lost"`
	// Failed: requests that got no answer in their attempts (routed through a frozen node); a
	// failed write may yet happen, and its key is no longer written or read by the clients.
	Failed int `json:"failed"`
	// Violations: answers the acknowledged writes forbid (a stale value, a value never written,
	// an acknowledged key not found), and keys left after the run in a state no write gave them.
	Violations int      `json:"violations"`
	Examples   []string `json:"violation_examples,omitempty"`
}

// maxViolationExamples bounds the violations a result describes.
const maxViolationExamples = 10

// clientKey is the model of one key the clients write: seq numbers its writes (0 is the value
// the run loaded), acked is the last acknowledged one, issued the last one sent.
type clientKey struct {
	acked, issued, delIssued uint64
	ackedDel                 bool
	writing                  bool
	// uncertain: a write failed on the client's side and may yet happen; the key is left alone
	// and checked once at the end (settleUncertain).
	uncertain bool
}

// checkedClients run random reads and writes of the loaded keys from random running nodes
// during a balancing run, and check every answer against the model of acknowledged writes: the
// docker chaos test's workload, deterministic. One write per key is in flight at a time.
type checkedClients struct {
	h     *Harness
	keys  []overlay.Key
	model []clientKey
	rng   *rand.Rand
	stats ClientStats
	// faulted is set once a crash or a pause has come (LOST answers are allowed from then
	// on); crashes counts the crashes, so that a write acknowledged across one is known to
	// be uncertain (its owner may have died with it).
	faulted bool
	crashes int
}

func newCheckedClients(h *Harness, keys []overlay.Key, seed uint64) *checkedClients {
	return &checkedClients{h: h, keys: keys, model: make([]clientKey, len(keys)), rng: rand.New(rand.NewPCG(seed, 0xc11e))}
}

// clientValue is the value write seq of a key puts; seq 0 is the loaded value.
func clientValue(seq uint64) string {
	if seq == 0 {
		return "v"
	}
	return "c" + strconv.FormatUint(seq, 10)
}

// parseClientValue inverts clientValue.
func parseClientValue(v string) (uint64, bool) {
	if v == "v" {
		return 0, true
	}
	if !strings.HasPrefix(v, "c") {
		return 0, false
	}
	seq, err := strconv.ParseUint(v[1:], 10, 64)
	return seq, err == nil && seq > 0
}

// issue starts one client operation: a read half of the time, else a put, one in four a delete.
func (c *checkedClients) issue() {
	i := c.rng.IntN(len(c.keys))
	x := c.rng.Float64()
	m := &c.model[i]
	switch {
	case m.uncertain:
	case x < 0.5 || m.writing:
		c.read(i)
	default:
		c.write(i, x >= 0.875)
	}
}

func (c *checkedClients) write(i int, del bool) {
	m, k := &c.model[i], c.keys[i]
	m.issued++
	seq := m.issued
	if del {
		m.delIssued = seq
	}
	m.writing = true
	c.stats.Writes++
	v, crashes := clientValue(seq), c.crashes
	c.h.write(c.h.randomOwner(), k, v, del, func(r overlay.Result) {
		m.writing = false
		if r.Status != pb.Status_STATUS_OK {
			c.stats.Failed++
			m.uncertain = true
			return
		}
		if c.crashes != crashes {
			m.uncertain = true // the node that stored it may have crashed since
			return
		}
		m.acked, m.ackedDel = seq, del
		delete(c.h.Lost, k) // written again after a crash took it
		if del {
			delete(c.h.Expected, k)
		} else {
			c.h.Expected[k] = v
		}
	})
}

func (c *checkedClients) read(i int) {
	m, k := &c.model[i], c.keys[i]
	acked, ackedDel, lostBefore := m.acked, m.ackedDel, c.h.Lost[k]
	at := c.h.randomOwner()
	c.stats.Reads++
	c.h.Do(at, func(n *node.Node) uint64 { return n.Get(k) }, func(r overlay.Result) {
		if m.uncertain || lostBefore || c.h.Lost[k] {
			return // its value is not known (a failed write, or lost with a crashed node)
		}
		mayBeAbsent := ackedDel || m.delIssued > acked
		switch r.Status {
		case pb.Status_STATUS_OK:
			seq, ok := parseClientValue(string(r.Value))
			switch {
			case !ok || seq > m.issued:
				c.violate("get %s via %s: value %q from %s was never written (issued up to c%d)", overlay.FormatKey(k), at, r.Value, r.Owner, m.issued)
			case seq < acked:
				c.violate("get %s via %s: value %s from %s older than the acknowledged %s", overlay.FormatKey(k), at, clientValue(seq), r.Owner, c.describe(acked, ackedDel))
			}
		case pb.Status_STATUS_NOT_FOUND:
			if !mayBeAbsent {
				c.violate("get %s via %s: not found at %s, though %s was acknowledged", overlay.FormatKey(k), at, r.Owner, c.describe(acked, ackedDel))
			}
		case pb.Status_STATUS_LOST:
			c.stats.Lost++
			if !c.faulted {
				c.violate("get %s via %s: answered LOST by %s in a run without faults", overlay.FormatKey(k), at, r.Owner)
			}
		default:
			c.stats.Failed++
		}
	})
}

// describe names a key's write seq for a violation.
func (c *checkedClients) describe(seq uint64, del bool) string {
	if del {
		return fmt.Sprintf("the delete c%d", seq)
	}
	return "the put " + clientValue(seq)
}

func (c *checkedClients) violate(format string, args ...any) {
	c.stats.Violations++
	if len(c.stats.Examples) < maxViolationExamples {
		c.stats.Examples = append(c.stats.Examples, fmt.Sprintf("t=%s ", c.h.Net.Now())+fmt.Sprintf(format, args...))
	}
}

// settleUncertain decides, once the run is quiet, what each key whose write failed must hold —
// or whose write was never answered: its origin crashed with the request — what its owner
// holds, if the acknowledged write or the uncertain one left it so (or a crash took it),
// anything else being a violation; the run's item check then covers the key too.
func (c *checkedClients) settleUncertain() {
	for i := range c.model {
		m, k := &c.model[i], c.keys[i]
		if !m.uncertain && !m.writing {
			continue
		}
		var held string
		found := false
		if owner := c.h.Net.Owner(k); owner != nil {
			if it, ok, _ := owner.Store().Get(k); ok {
				held, found = string(it.Value), true
			}
		}
		lastDel := m.delIssued == m.issued
		seq, ok := parseClientValue(held)
		switch {
		case !found && (m.ackedDel || lastDel || c.h.Lost[k]):
			delete(c.h.Expected, k)
		case found && ok && (seq == m.issued && !lastDel || seq == m.acked && !m.ackedDel):
			c.h.Expected[k] = held
			delete(c.h.Lost, k)
		default:
			c.violate("after the run %s holds %q (found %v): neither %s nor the uncertain write c%d left it so",
				overlay.FormatKey(k), held, found, c.describe(m.acked, m.ackedDel), m.issued)
		}
	}
}
