package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skiprange/skiprange/client"
	"github.com/skiprange/skiprange/overlay"
	"github.com/skiprange/skiprange/overlay/pb"
)

// KeySpace is N integer keys spread evenly over the 64-bit circle (key i is the 8-byte
// big-endian encoding of i·2⁶⁴/N + 2⁶³/N), so that nodes joining at random positions share them
// in proportion to their arcs, and key order is index order.
type KeySpace struct {
	N      int
	stride uint64
}

// NewKeySpace returns n keys.
func NewKeySpace(n int) KeySpace {
	return KeySpace{N: n, stride: ^uint64(0)/uint64(n) + 1}
}

// Key returns key i (i taken modulo N).
func (ks KeySpace) Key(i int) []byte {
	i = ((i % ks.N) + ks.N) % ks.N
	return []byte(overlay.Uint64Key(uint64(i)*ks.stride + ks.stride/2))
}

// Index returns the index of a key of the space.
func (ks KeySpace) Index(k []byte) (int, bool) {
	if len(k) != 8 {
		return 0, false
	}
	u := overlay.KeyUint64(overlay.Key(k))
	if u%ks.stride != ks.stride/2 {
		return 0, false
	}
	i := int(u / ks.stride)
	return i, i < ks.N
}

// Within returns the indices of the keys in kr.
func (ks KeySpace) Within(kr *pb.KeyRange) []int {
	var out []int
	for i := 0; i < ks.N; i++ {
		if Contains(kr, ks.Key(i)) {
			out = append(out, i)
		}
	}
	return out
}

// keyState is the model of one key: acked is the sequence number of the last acknowledged write,
// issued the last one sent (writes after acked failed on the client's side and may or may not
// have been applied). A write is a put of Value(i, seq) or a delete: ackedDel says the
// acknowledged one was a delete, delIssued is the sequence of the last delete sent. Only one
// write per key is in flight at a time (writing), and after a failed write the key is not
// written again until quietUntil — past the entry node's own request timeout — so that a late
// failed write can never overwrite a newer acknowledged one.
type keyState struct {
	mu         sync.Mutex
	acked      uint64
	ackedDel   bool
	issued     uint64
	delIssued  uint64
	ackedSent  time.Time // when the acked write was sent
	writing    bool
	quietUntil time.Time
	history    []writeRec // the last writes, for the evidence of a violation
}

// writeRec is one write to a key as the model saw it.
type writeRec struct {
	seq         uint64
	sent, ended time.Time
	via, owner  string
	outcome     string // "ok" or the error class
}

const historyLen = 6

// Model is what the overlay must hold: per key, the acknowledged writes.
type Model struct {
	KS   KeySpace
	keys []keyState
}

// NewModel returns an empty model of ks.
func NewModel(ks KeySpace) *Model { return &Model{KS: ks, keys: make([]keyState, ks.N)} }

// Value is the value written to key i by write seq: it names both, so that a wrong answer says
// where it came from.
func Value(i int, seq uint64) []byte {
	return []byte(fmt.Sprintf("k%06d.s%06d.%s", i, seq, "payload-payload-payload"))
}

// ParseValue inverts Value.
func ParseValue(v []byte) (i int, seq uint64, ok bool) {
	parts := strings.SplitN(string(v), ".", 3)
	if len(parts) != 3 || len(parts[0]) < 2 || parts[0][0] != 'k' || len(parts[1]) < 2 || parts[1][0] != 's' {
		return 0, 0, false
	}
	a, err1 := strconv.Atoi(parts[0][1:])
	b, err2 := strconv.ParseUint(parts[1][1:], 10, 64)
	return a, b, err1 == nil && err2 == nil
}

// acked is a key's last acknowledged write, taken before a read is sent.
type acked struct {
	seq     uint64
	deleted bool
}

// issued is a key's last writes sent, taken after a read's answer came.
type issued struct {
	seq, delete uint64 // the last write, and the last delete (0: none)
}

func (m *Model) ackedOf(i int) acked {
	k := &m.keys[i]
	k.mu.Lock()
	defer k.mu.Unlock()
	return acked{k.acked, k.ackedDel}
}

func (m *Model) issuedOf(i int) issued {
	k := &m.keys[i]
	k.mu.Lock()
	defer k.mu.Unlock()
	return issued{k.issued, k.delIssued}
}

// AckedSent returns when key i's acknowledged write was sent.
func (m *Model) AckedSent(i int) time.Time {
	k := &m.keys[i]
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ackedSent
}

// beginWrite reserves key i for a write (a delete when del) and returns its sequence number, or
// false when the key is being written or quiet.
func (m *Model) beginWrite(i int, now time.Time, del bool) (uint64, bool) {
	k := &m.keys[i]
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.writing || now.Before(k.quietUntil) {
		return 0, false
	}
	k.writing = true
	k.issued++
	if del {
		k.delIssued = k.issued
	}
	return k.issued, true
}

// endWrite records the outcome of write seq of key i sent at sent through via (owner: the node
// that stored it, when the reply names it).
func (m *Model) endWrite(i int, seq uint64, sent time.Time, ok bool, quiet time.Duration, via, owner, outcome string) {
	k := &m.keys[i]
	k.mu.Lock()
	defer k.mu.Unlock()
	k.history = append(k.history, writeRec{seq: seq, sent: sent, ended: time.Now(), via: via, owner: owner, outcome: outcome})
	if len(k.history) > historyLen {
		k.history = k.history[1:]
	}
	k.writing = false
	if ok {
		k.acked, k.ackedDel, k.ackedSent = seq, seq == k.delIssued, sent
	} else {
		k.quietUntil = time.Now().Add(quiet)
	}
}

// History describes the last writes of key i: sequence, when sent and answered (seconds since
// start), through which entry node, stored by which owner, outcome.
func (m *Model) History(i int, start time.Time, name func(owner string) string) string {
	k := &m.keys[i]
	k.mu.Lock()
	defer k.mu.Unlock()
	var parts []string
	for _, h := range k.history {
		parts = append(parts, fmt.Sprintf("s%d %+.2f→%+.2fs via %s owner %s %s", h.seq, h.sent.Sub(start).Seconds(), h.ended.Sub(start).Seconds(), h.via, name(h.owner), h.outcome))
	}
	return "writes of key " + strconv.Itoa(i) + ": [" + strings.Join(parts, "; ") + "]"
}

// Verdict of a read checked against the model.
type Verdict int

const (
	VerdictOK      Verdict = iota
	VerdictStale           // a value older than the last acknowledged write
	VerdictBogus           // a value never written to this key
	VerdictMissing         // not found, though a put was acknowledged
)

func (v Verdict) String() string {
	return [...]string{"ok", "stale value", "value never written to this key", "acknowledged key not found"}[v]
}

// mayBeAbsent reports whether key i may be missing: never acknowledged, deleted by the
// acknowledged write, or by a later delete sent (in flight, or failed on the client's side).
func mayBeAbsent(before acked, after issued) bool {
	return before.seq == 0 || before.deleted || after.delete > before.seq
}

// check judges a value read for key i, given the acknowledged write before the read was sent
// and the writes issued by the time its answer came. A value older than an acknowledged delete
// is stale: the delete was undone.
func check(i int, val []byte, found bool, before acked, after issued) (Verdict, string) {
	if !found {
		if !mayBeAbsent(before, after) {
			return VerdictMissing, fmt.Sprintf("key %d not found; put s%d was acknowledged", i, before.seq)
		}
		return VerdictOK, ""
	}
	vi, seq, ok := ParseValue(val)
	switch {
	case !ok || vi != i || seq == 0 || seq > after.seq || seq == after.delete:
		return VerdictBogus, fmt.Sprintf("key %d: value %.40q (issued up to s%d)", i, val, after.seq)
	case seq < before.seq && before.deleted:
		return VerdictStale, fmt.Sprintf("key %d: value s%d, though the delete s%d was acknowledged", i, seq, before.seq)
	case seq < before.seq:
		return VerdictStale, fmt.Sprintf("key %d: value s%d older than the acknowledged s%d", i, seq, before.seq)
	}
	return VerdictOK, ""
}

// ErrorEvent is one failed client request.
type ErrorEvent struct {
	T     time.Time
	Op    string
	Class string
	Entry string
	Msg   string
}

// Violation is an answer the model forbids.
type Violation struct {
	T   time.Time
	Op  string
	Msg string
}

// LostAnswer is a read answered STATUS_LOST (or a scan marked incomplete).
type LostAnswer struct {
	T   time.Time
	Key int
}

// WorkloadConfig shapes the background workload.
type WorkloadConfig struct {
	Rate      float64       // operations per second, all workers together
	Workers   int           // each owns the keys i with i % Workers == its number
	GetShare  float64       // the rest after gets and scans are puts
	ScanShare float64       // scans read ScanKeys consecutive keys with limit ScanLimit
	DelShare  float64       // deletes of a key the worker owns; the rest are puts
	ScanKeys  int           //
	ScanLimit uint32        //
	Timeout   time.Duration // per request
	Quiet     time.Duration // no write to a key for this long after a failed write to it
}

// Workload drives the checked workload and the pulse, and keeps every error and violation.
type Workload struct {
	cfg   WorkloadConfig
	tn    *Testnet
	tl    *Timeline
	Model *Model

	pulse atomic.Pointer[PulseSpec]

	mu         sync.Mutex
	errs       []ErrorEvent
	violations []Violation
	lost       []LostAnswer
	ops        map[string]int

	stop chan struct{}
	wg   sync.WaitGroup
}

// PulseSpec is a read pulse: Rate gets per second over the keys [Lo, Lo+Width) (modulo N).
type PulseSpec struct {
	Lo, Width int
	Rate      float64
	Started   time.Time
}

// NewWorkload returns a workload over m; nothing runs until Start.
func NewWorkload(tn *Testnet, m *Model, cfg WorkloadConfig) *Workload {
	return &Workload{cfg: cfg, tn: tn, tl: tn.tl, Model: m, ops: map[string]int{}, stop: make(chan struct{})}
}

// Load writes every key once (sequence 1) with batch writes, retrying failed batches.
func (w *Workload) Load(ctx context.Context, batch int) error {
	m := w.Model
	for lo := 0; lo < m.KS.N; lo += batch {
		hi := min(lo+batch, m.KS.N)
		var items []*pb.Item
		seqs := make([]uint64, 0, hi-lo)
		for i := lo; i < hi; i++ {
			seq, ok := m.beginWrite(i, time.Now(), false)
			if !ok {
				return fmt.Errorf("load: key %d busy", i)
			}
			seqs = append(seqs, seq)
			items = append(items, &pb.Item{Key: m.KS.Key(i), Value: Value(i, seq)})
		}
		var err error
		for attempt := 0; attempt < 5; attempt++ {
			sent := time.Now()
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			var rep *pb.ClientReply
			rep, err = w.tn.Client.PutBatch(rctx, w.entry().Addr, items)
			cancel()
			if err == nil && int(rep.GetStored()) == len(items) {
				for j, i := 0, lo; i < hi; i, j = i+1, j+1 {
					m.endWrite(i, seqs[j], sent, true, 0, "batch", "", "ok")
				}
				break
			}
			if err == nil {
				err = fmt.Errorf("stored %d of %d", rep.GetStored(), len(items))
			}
			time.Sleep(500 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("load keys %d..%d: %w", lo, hi, err)
		}
	}
	w.tl.Event("load", "%d keys written (sequence 1)", m.KS.N)
	return nil
}

// entry returns a random live node.
func (w *Workload) entry() *Node {
	live := w.tn.Live()
	return live[rand.IntN(len(live))]
}

// Start runs the workers (and the pulse readers, idle until SetPulse) until Stop or ctx ends.
func (w *Workload) Start(ctx context.Context) {
	for id := 0; id < w.cfg.Workers; id++ {
		w.wg.Add(1)
		go w.worker(ctx, id)
	}
	for id := 0; id < 4; id++ {
		w.wg.Add(1)
		go w.pulseReader(ctx, id, 4)
	}
}

// Stop ends the workload and waits for it.
func (w *Workload) Stop() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
}

// SetPulse starts (or moves, or with nil stops) the read pulse.
func (w *Workload) SetPulse(p *PulseSpec) {
	if p != nil {
		p.Started = time.Now()
		w.tl.Event("pulse", "pulse of %.0f gets/s over keys %d..%d (%d keys)", p.Rate, p.Lo, p.Lo+p.Width-1, p.Width)
	} else {
		w.tl.Event("pulse", "pulse stopped")
	}
	w.pulse.Store(p)
}

// Pulse returns the current pulse, or nil.
func (w *Workload) Pulse() *PulseSpec { return w.pulse.Load() }

// pace sleeps until the next operation of a loop running at rate, or returns false when the
// workload stops.
func (w *Workload) pace(ctx context.Context, next *time.Time, rate float64) bool {
	if rate <= 0 {
		rate = 1
	}
	*next = next.Add(time.Duration(float64(time.Second) / rate))
	now := time.Now()
	if next.Before(now) {
		*next = now // behind (a slow request): do not burst to catch up
	}
	select {
	case <-w.stop:
		return false
	case <-ctx.Done():
		return false
	case <-time.After(next.Sub(now)):
		return true
	}
}

func (w *Workload) worker(ctx context.Context, id int) {
	defer w.wg.Done()
	rng := rand.New(rand.NewPCG(uint64(id), 77))
	own := func() int {
		n := (w.Model.KS.N - 1 - id) / w.cfg.Workers
		return id + w.cfg.Workers*rng.IntN(n+1)
	}
	next := time.Now()
	for w.pace(ctx, &next, w.cfg.Rate/float64(w.cfg.Workers)) {
		switch x := rng.Float64(); {
		case x < w.cfg.GetShare:
			w.get(ctx, own(), "get")
		case x < w.cfg.GetShare+w.cfg.ScanShare:
			w.scan(ctx, rng.IntN(w.Model.KS.N))
		case x < w.cfg.GetShare+w.cfg.ScanShare+w.cfg.DelShare:
			w.write(ctx, own(), true)
		default:
			w.write(ctx, own(), false)
		}
	}
}

func (w *Workload) pulseReader(ctx context.Context, id, of int) {
	defer w.wg.Done()
	rng := rand.New(rand.NewPCG(uint64(id), 99))
	next := time.Now()
	for {
		p := w.pulse.Load()
		rate := 2.0
		if p != nil {
			rate = p.Rate / float64(of)
		}
		if !w.pace(ctx, &next, rate) {
			return
		}
		if p = w.pulse.Load(); p == nil {
			continue
		}
		w.get(ctx, (p.Lo+rng.IntN(p.Width))%w.Model.KS.N, "pulse") // a pulse may wrap the seam
	}
}

func (w *Workload) count(op string) {
	w.mu.Lock()
	w.ops[op]++
	w.mu.Unlock()
}

func (w *Workload) recordErr(op string, entry *Node, err error) {
	ev := ErrorEvent{T: time.Now(), Op: op, Class: client.Class(err), Entry: entry.Service, Msg: err.Error()}
	w.mu.Lock()
	w.errs = append(w.errs, ev)
	w.mu.Unlock()
}

func (w *Workload) violate(op, format string, args ...any) {
	v := Violation{T: time.Now(), Op: op, Msg: fmt.Sprintf(format, args...)}
	w.mu.Lock()
	w.violations = append(w.violations, v)
	w.mu.Unlock()
	w.tl.Event("VIOLATION", "%s: %s", op, v.Msg)
}

func (w *Workload) lostAnswer(i int) {
	w.mu.Lock()
	w.lost = append(w.lost, LostAnswer{T: time.Now(), Key: i})
	w.mu.Unlock()
}

// get reads key i through a random live node and checks the answer. It returns the class of
// the outcome.
func (w *Workload) get(ctx context.Context, i int, op string) string {
	m := w.Model
	entry := w.entry()
	before := m.ackedOf(i)
	rctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	rep, err := w.tn.Client.Get(rctx, entry.Addr, m.KS.Key(i))
	cancel()
	after := m.issuedOf(i)
	w.count(op)
	if ctx.Err() != nil {
		return "canceled"
	}
	switch {
	case err == nil || errors.Is(err, client.ErrNotFound):
		verdict, msg := check(i, rep.GetValue(), err == nil, before, after)
		if verdict != VerdictOK {
			w.violate(op, "%s via %s, answered by owner %s: %s; %s", verdict, entry.Service, w.ownerName(rep.GetOwner()), msg, w.history(i))
			return "violation"
		}
		return "ok"
	case errors.Is(err, client.ErrLost):
		w.lostAnswer(i)
		w.recordErr(op, entry, err)
		return "lost"
	default:
		w.recordErr(op, entry, err)
		return "error"
	}
}

// write puts a new value to key i, or deletes it (skipped when the key is busy or quiet).
func (w *Workload) write(ctx context.Context, i int, del bool) {
	m := w.Model
	seq, ok := m.beginWrite(i, time.Now(), del)
	if !ok {
		return
	}
	op := "put"
	if del {
		op = "delete"
	}
	entry := w.entry()
	sent := time.Now()
	rctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	var rep *pb.ClientReply
	var err error
	if del {
		rep, err = w.tn.Client.Delete(rctx, entry.Addr, m.KS.Key(i))
	} else {
		rep, err = w.tn.Client.Put(rctx, entry.Addr, m.KS.Key(i), Value(i, seq))
	}
	cancel()
	m.endWrite(i, seq, sent, err == nil, w.cfg.Quiet, entry.Service, w.ownerName(rep.GetOwner()), client.Class(err))
	w.count(op)
	if err != nil && ctx.Err() == nil {
		w.recordErr(op, entry, err)
	}
}

// scan reads ScanKeys consecutive keys from key lo with limit ScanLimit and checks that what it
// returns is in order, inside the range, with acceptable values, and that no key the model holds
// is missing before the continuation, unless the answer is marked incomplete.
func (w *Workload) scan(ctx context.Context, lo int) {
	m := w.Model
	n := min(w.cfg.ScanKeys, m.KS.N-1)
	idx := make([]int, n)
	before := make([]acked, n)
	for j := range idx {
		idx[j] = (lo + j) % m.KS.N
		before[j] = m.ackedOf(idx[j])
	}
	entry := w.entry()
	rctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	rep, err := w.tn.Client.Scan(rctx, entry.Addr, m.KS.Key(lo), m.KS.Key(lo+n), w.cfg.ScanLimit)
	cancel()
	w.count("scan")
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		w.recordErr("scan", entry, err)
		return
	}
	pos := 0 // next expected position in idx
	for _, it := range rep.GetItems() {
		ki, ok := m.KS.Index(it.GetKey())
		if !ok {
			w.violate("scan", "via %s: key %x is not a key of the workload", entry.Service, it.GetKey())
			return
		}
		j := pos
		for j < n && idx[j] != ki {
			j++
		}
		if j == n {
			w.violate("scan", "via %s: key %d out of order or outside [%d, %d)", entry.Service, ki, lo, lo+n)
			return
		}
		if skipped := w.missed(idx[pos:j], before[pos:j]); len(skipped) > 0 && !rep.GetIncomplete() {
			w.violate("scan", "via %s, served by %s: scan from key %d skipped keys %v (answer not marked incomplete)", entry.Service, w.servedBy(rep), lo, skipped)
		}
		if v, msg := check(ki, it.GetValue(), true, before[j], m.issuedOf(ki)); v != VerdictOK {
			w.violate("scan", "%s via %s, served by %s: %s; %s", v, entry.Service, w.servedBy(rep), msg, w.history(ki))
		}
		pos = j + 1
	}
	end := n
	if rep.GetMore() {
		ci, ok := m.KS.Index(rep.GetContinuation())
		end = pos
		for end < n && ok && idx[end] != ci {
			end++
		}
	}
	if missed := w.missed(idx[pos:end], before[pos:end]); len(missed) > 0 && !rep.GetIncomplete() {
		w.violate("scan", "via %s, served by %s: scan from key %d (limit %d, more=%v) missed keys %v (answer not marked incomplete)",
			entry.Service, w.servedBy(rep), lo, w.cfg.ScanLimit, rep.GetMore(), missed)
	}
	if rep.GetIncomplete() {
		w.mu.Lock()
		w.ops["scan_incomplete"]++
		w.mu.Unlock()
	}
}

// missed returns the keys of idx that a scan left out and the model says must be there (before:
// their acknowledged writes when the scan was sent).
func (w *Workload) missed(idx []int, before []acked) []int {
	var out []int
	for j, i := range idx {
		if !mayBeAbsent(before[j], w.Model.issuedOf(i)) {
			out = append(out, i)
		}
	}
	return out
}

// Mark is a position in the workload's records, to report what happened since.
type Mark struct {
	T                time.Time
	errs, viol, lost int
	ops              map[string]int
}

// Mark returns the current position.
func (w *Workload) Mark() Mark {
	w.mu.Lock()
	defer w.mu.Unlock()
	ops := map[string]int{}
	for k, v := range w.ops {
		ops[k] = v
	}
	return Mark{T: time.Now(), errs: len(w.errs), viol: len(w.violations), lost: len(w.lost), ops: ops}
}

// Report is what the workload saw between two marks.
type Report struct {
	From, To   time.Time
	Ops        map[string]int
	Errors     []ErrorEvent
	Violations []Violation
	Lost       []LostAnswer
}

// Since returns what happened since mark.
func (w *Workload) Since(mark Mark) Report {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := Report{From: mark.T, To: time.Now(), Ops: map[string]int{}}
	for k, v := range w.ops {
		if d := v - mark.ops[k]; d > 0 {
			r.Ops[k] = d
		}
	}
	r.Errors = append(r.Errors, w.errs[mark.errs:]...)
	r.Violations = append(r.Violations, w.violations[mark.viol:]...)
	r.Lost = append(r.Lost, w.lost[mark.lost:]...)
	return r
}

// ErrorSummary condenses the errors of a report: how many of each class, and when the first and
// the last happened relative to ref (the fault), and how long errors lasted (first to last).
type ErrorSummary struct {
	Count       int
	ByClass     map[string]int
	First, Last time.Duration // relative to ref
	Span        time.Duration // Last − First
	OpsTotal    int
}

// Summarize condenses r's errors relative to ref.
func (r Report) Summarize(ref time.Time) ErrorSummary {
	s := ErrorSummary{ByClass: map[string]int{}}
	for _, n := range r.Ops {
		s.OpsTotal += n
	}
	s.OpsTotal -= r.Ops["scan_incomplete"]
	for i, e := range r.Errors {
		s.Count++
		s.ByClass[e.Class]++
		d := e.T.Sub(ref)
		if i == 0 {
			s.First = d
		}
		s.Last = d
	}
	if s.Count > 0 {
		s.Span = s.Last - s.First
	}
	return s
}

func (s ErrorSummary) String() string {
	if s.Count == 0 {
		return fmt.Sprintf("0 errors in %d requests", s.OpsTotal)
	}
	var cls []string
	for k, v := range s.ByClass {
		cls = append(cls, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(cls)
	return fmt.Sprintf("%d errors in %d requests (%s), from %+.2fs to %+.2fs after the fault (lasting %.2fs)",
		s.Count, s.OpsTotal, strings.Join(cls, ", "), s.First.Seconds(), s.Last.Seconds(), s.Span.Seconds())
}

// VerifyResult is the outcome of a verification pass over every key.
type VerifyResult struct {
	Keys     int
	OK       int
	LostKeys []int // answered LOST, inside a reported lost range, last written before durableAfter
	InLostOK int   // inside a reported lost range yet readable (rewritten, or never lost)
	// LostAbsent counts keys answered LOST, inside a reported lost range, that the model says
	// may not exist (deleted, or never written): right by the protocol, whose node cannot tell a
	// key deleted before its part was lost from a key lost with it; nothing of them is lost.
	LostAbsent   int
	Violations   []string
	BadKeys      []int // the keys of the violations
	LostRanges   []*pb.KeyRange
	ReportedLost uint64 // sum of the nodes' lost_items
}

// Verify reads every key through random live nodes (retrying errors a few times) while the
// workload runs, and checks each answer: the acknowledged value (or a later one being written);
// LOST only for a key inside a lost range the nodes report (lostRings: the rings walked around
// the pass, whose lost ranges are united) and whose acknowledged write was sent before
// durableAfter (a write acknowledged once the ring was whole again must survive); never "not
// found" for a written key; never an error that persists.
func (w *Workload) Verify(ctx context.Context, durableAfter time.Time, lostRings ...*client.Ring) VerifyResult {
	m := w.Model
	res := VerifyResult{Keys: m.KS.N}
	seen := map[string]bool{}
	for _, r := range lostRings {
		if r == nil {
			continue
		}
		var items uint64
		for _, x := range r.Nodes {
			items += x.Status.GetLostItems()
			for _, kr := range x.Status.GetLost() {
				id := fmt.Sprintf("%x-%x", kr.GetStart(), kr.GetEnd())
				if !seen[id] {
					seen[id] = true
					res.LostRanges = append(res.LostRanges, kr)
				}
			}
		}
		res.ReportedLost = max(res.ReportedLost, items)
	}
	inLost := func(k []byte) bool {
		for _, kr := range res.LostRanges {
			if Contains(kr, k) {
				return true
			}
		}
		return false
	}
	var mu sync.Mutex
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := 0; i < m.KS.N; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			key := m.KS.Key(i)
			var rep *pb.ClientReply
			var err error
			var before acked
			var after issued
			var entry *Node
			for attempt := 0; attempt < 4; attempt++ {
				entry = w.entry()
				before = m.ackedOf(i)
				rctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
				rep, err = w.tn.Client.Get(rctx, entry.Addr, key)
				cancel()
				after = m.issuedOf(i)
				if err == nil || errors.Is(err, client.ErrNotFound) || errors.Is(err, client.ErrLost) || ctx.Err() != nil {
					break
				}
				time.Sleep(300 * time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil || errors.Is(err, client.ErrNotFound):
				v, msg := check(i, rep.GetValue(), err == nil, before, after)
				switch {
				case v != VerdictOK && inLost(key) && v == VerdictMissing:
					res.Violations = append(res.Violations, fmt.Sprintf("%s via %s, answered by owner %s (inside a reported lost range: the node should answer LOST); %s",
						msg, entry.Service, w.ownerName(rep.GetOwner()), w.history(i)))
					res.BadKeys = append(res.BadKeys, i)
				case v != VerdictOK:
					res.Violations = append(res.Violations, fmt.Sprintf("%s: %s via %s, answered by owner %s; %s", v, msg, entry.Service, w.ownerName(rep.GetOwner()), w.history(i)))
					res.BadKeys = append(res.BadKeys, i)
				default:
					res.OK++
					if inLost(key) {
						res.InLostOK++
					}
				}
			case errors.Is(err, client.ErrLost):
				sent := m.AckedSent(i)
				switch {
				case !inLost(key):
					res.Violations = append(res.Violations, fmt.Sprintf("key %d answered LOST via %s but lies in no reported lost range (acked s%d sent at %+.2fs)",
						i, entry.Service, before.seq, sent.Sub(w.tl.Start()).Seconds()))
					res.BadKeys = append(res.BadKeys, i)
				case mayBeAbsent(before, after):
					res.LostAbsent++
				case sent.After(durableAfter):
					res.Violations = append(res.Violations, fmt.Sprintf("key %d answered LOST via %s: its write s%d was sent at %+.2fs, after the ring was whole again (%+.2fs)",
						i, entry.Service, before.seq, sent.Sub(w.tl.Start()).Seconds(), durableAfter.Sub(w.tl.Start()).Seconds()))
					res.BadKeys = append(res.BadKeys, i)
				default:
					res.LostKeys = append(res.LostKeys, i)
				}
			default:
				res.Violations = append(res.Violations, fmt.Sprintf("key %d unreadable via %s after 4 attempts: %v", i, entry.Service, err))
				res.BadKeys = append(res.BadKeys, i)
			}
		}(i)
	}
	wg.Wait()
	sort.Ints(res.LostKeys)
	sort.Ints(res.BadKeys)
	return res
}

// Rewrite writes a fresh value to each of keys (those found lost or damaged), so that later
// scenarios start from a full set and each scenario's violations are its own. It returns the
// keys it could not rewrite now: written by their worker at the moment, quiet after a failed
// write, or failing; their workers write them again later.
func (w *Workload) Rewrite(ctx context.Context, keys []int) (left []int) {
	for _, i := range keys {
		seq, ok := w.Model.beginWrite(i, time.Now(), false)
		if !ok {
			left = append(left, i)
			continue
		}
		entry := w.entry()
		sent := time.Now()
		rctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
		rep, err := w.tn.Client.Put(rctx, entry.Addr, w.Model.KS.Key(i), Value(i, seq))
		cancel()
		w.Model.endWrite(i, seq, sent, err == nil, w.cfg.Quiet, entry.Service+" (rewrite)", w.ownerName(rep.GetOwner()), client.Class(err))
		if err != nil {
			left = append(left, i)
		}
	}
	return left
}

// keyOrder sorts ranges by start for printing.
func keyOrder(rs []*pb.KeyRange) []*pb.KeyRange {
	out := append([]*pb.KeyRange(nil), rs...)
	sort.Slice(out, func(a, b int) bool { return bytes.Compare(out[a].GetStart(), out[b].GetStart()) < 0 })
	return out
}

// ownerName names the node of a reply's owner reference (its service when it is ours).
func (w *Workload) ownerName(ref *pb.NodeRef) string {
	id := client.RefID(ref)
	if id == "" {
		return "?"
	}
	if n := w.tn.ByID(id); n != nil {
		return n.Service
	}
	return client.ShortID(id)
}

// servedBy names the nodes that served a scan.
func (w *Workload) servedBy(rep *pb.ClientReply) string {
	var names []string
	for _, b := range rep.GetServedBy() {
		names = append(names, w.ownerName(&pb.NodeRef{Id: b}))
	}
	return strings.Join(names, ",")
}

func (w *Workload) history(i int) string {
	return w.Model.History(i, w.tl.Start(), func(owner string) string { return owner })
}
