package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/skiprange/skiprange/client"
	"github.com/skiprange/skiprange/overlay/pb"
)

func statusCmd() *command {
	return &command{
		name: "status", nargs: 0,
		summary: "describe the entry node",
		help: `Asks the entry node about itself (nothing is routed): its peer ID and addresses, life
state, balancing algorithm, the key range it owns, its items, its load against its threshold
(overloaded when load > thres), whether a balancing wave holds it locked, the ranges it knows
lost with failed nodes (and how many keys deleted there it remembers, so that a node coming back
with older copies does not bring them back), its neighbours on every level of the skip graph
(level 0 is the ring) and its counters.

Examples:
  skipctl status
  skipctl status --peer /ip4/10.0.0.7/tcp/4001/p2p/12D3KooW… --json
`,
		setup: func(a *app, fs *flag.FlagSet) func(context.Context, []string) error {
			return func(ctx context.Context, _ []string) error {
				c, entry, err := a.connect(ctx)
				if err != nil {
					return err
				}
				defer c.Close()
				st, err := c.Status(ctx, entry)
				if err != nil {
					return err
				}
				if a.g.json {
					a.writeJSON(struct {
						OK      bool     `json:"ok"`
						Command string   `json:"command"`
						Node    jsonNode `json:"node"`
					}{true, "status", nodeJSON(st, a.g.hex)})
					return nil
				}
				renderStatus(a.stdout, st, a.g.hex)
				return nil
			}
		},
	}
}

// renderStatus prints a node's status for a person.
func renderStatus(w io.Writer, st *pb.NodeStatus, hexMode bool) {
	row := func(label, format string, args ...any) {
		fmt.Fprintf(w, "%-10s %s\n", label, fmt.Sprintf(format, args...))
	}
	self := refJSON(st.GetSelf())
	if self == nil {
		self = &jsonRef{ID: "?"}
	}
	row("node", "%s", self.ID)
	if len(self.Addrs) > 0 {
		row("addrs", "%s", strings.Join(self.Addrs, " "))
	}
	row("state", "%s", orDash(st.GetState()))
	if st.GetAlgorithm() != "" {
		row("algorithm", "%s", st.GetAlgorithm())
	}
	row("range", "%s", showRange(st.GetRange(), hexMode))
	row("items", "%d", st.GetItems())
	load := fmt.Sprintf("%s / thres %s", num(st.GetLoad()), num(st.GetThres()))
	if st.GetOverThres() != 0 {
		load += fmt.Sprintf(" (over_thres %s)", num(st.GetOverThres()))
	}
	if overloaded(st) {
		load += "  * overloaded"
	}
	row("load", "%s", load)
	if st.GetLocked() {
		row("lock", "locked by wave %d", st.GetLockWave())
	} else {
		row("lock", "free")
	}
	if len(st.GetLost()) > 0 || st.GetLostItems() > 0 {
		var rs []string
		for _, kr := range st.GetLost() {
			rs = append(rs, showRange(kr, hexMode))
		}
		row("lost", "%d item%s in %d range%s %s", st.GetLostItems(), plural(int(st.GetLostItems())),
			len(rs), plural(len(rs)), strings.Join(rs, " "))
	}
	if n := st.GetTombstones(); n > 0 {
		row("deleted", "%d deleted key%s remembered against older copies", n, plural(int(n)))
	}
	if len(st.GetLevels()) == 0 {
		row("levels", "none (not linked)")
	} else {
		t := &table{header: []string{"level", "pred", "succ"}, right: []bool{true, false, false}}
		for i, l := range st.GetLevels() {
			t.add(fmt.Sprint(i), refShort(l.GetPred()), refShort(l.GetSucc()))
		}
		fmt.Fprintln(w, "levels")
		t.render(w, "  ")
	}
	if len(st.GetCounters()) > 0 {
		names := make([]string, 0, len(st.GetCounters()))
		for k := range st.GetCounters() {
			names = append(names, k)
		}
		sort.Strings(names)
		t := &table{header: []string{"counter", "value"}, right: []bool{false, true}}
		for _, k := range names {
			t.add(k, fmt.Sprint(st.GetCounters()[k]))
		}
		fmt.Fprintln(w, "counters")
		t.render(w, "  ")
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func ringCmd() *command {
	return &command{
		name: "ring", nargs: 0,
		summary: "walk the ring and show every node",
		help: `Walks level 0 of the skip graph clockwise from the entry node: it asks each node for its
status, then dials the node's successor at the addresses the node gives, until it is back at the
entry node. It prints one row per node — short peer ID, key range, items, load and threshold
('*' marks load > thres), lock — then a bar chart of the loads scaled to the highest, the
totals, and what looks wrong:

  error    the walk could not close the ring: a successor is unreachable or unknown, the
           successors loop without coming back, or --max nodes were visited
  warning  the ring closes but a node's level-0 predecessor is not the node before it, or two
           consecutive ranges do not meet — stale links, a join or repair in progress, a fault

Every request is bounded by --timeout, so a dead node is reported, not waited for. Exit status:
0 when the ring closed (warnings allowed), 3 when a successor was unreachable, 4 for the other
errors.

Examples:
  skipctl ring
  skipctl ring --ascii --width 60
  skipctl ring --json | jq '.totals'
`,
		setup: func(a *app, fs *flag.FlagSet) func(context.Context, []string) error {
			maxNodes := fs.Int("max", client.DefaultRingMax, "stop after `N` nodes")
			ascii := fs.Bool("ascii", false, "draw the bars with ASCII characters")
			width := fs.Int("width", 40, "width of the longest bar, in `columns`")
			return func(ctx context.Context, _ []string) error {
				if *maxNodes < 1 {
					return badUsage("--max must be >= 1, got %d", *maxNodes)
				}
				if *width < 1 || *width > 500 {
					return badUsage("--width must be in [1, 500], got %d", *width)
				}
				c, entry, err := a.connect(ctx)
				if err != nil {
					return err
				}
				defer c.Close()
				r, err := c.Ring(ctx, entry, *maxNodes)
				if err != nil {
					return err
				}
				if a.g.json {
					a.writeJSON(ringJSON(r, a.g.hex))
				} else {
					renderRing(a.stdout, r, a.g.hex, *ascii, *width)
				}
				return ringErr(r)
			}
		},
	}
}

// ringErr turns the errors of a walk into the exit status: 3 when a successor could not be
// reached (or timed out), 4 otherwise.
func ringErr(r *client.Ring) error {
	errs := r.Errors()
	if len(errs) == 0 {
		return nil
	}
	code := exitOverlay
	for _, i := range errs {
		if i.Err != nil && exitCode(i.Err) == exitUnreachable {
			code = exitUnreachable
		}
	}
	return exitError{code, fmt.Sprintf("the ring is not closed: %d error%s (see the report)", len(errs), plural(len(errs)))}
}

type ringTotals struct {
	Nodes      int     `json:"nodes"`
	Items      uint64  `json:"items"`
	LostItems  uint64  `json:"lost_items"`
	Overloaded int     `json:"overloaded"`
	Locked     int     `json:"locked"`
	Load       float64 `json:"load"`
}

func totals(r *client.Ring) ringTotals {
	t := ringTotals{Nodes: len(r.Nodes), Items: r.TotalItems(), LostItems: r.TotalLost()}
	for _, n := range r.Nodes {
		t.Load += n.Status.GetLoad()
		if overloaded(n.Status) {
			t.Overloaded++
		}
		if n.Status.GetLocked() {
			t.Locked++
		}
	}
	return t
}

type jsonIssue struct {
	Severity string `json:"severity"`
	Node     string `json:"node,omitempty"`
	At       int    `json:"at"`
	Message  string `json:"message"`
	Class    string `json:"class,omitempty"`
}

func ringJSON(r *client.Ring, hexMode bool) any {
	out := struct {
		OK      bool        `json:"ok"`
		Command string      `json:"command"`
		Closed  bool        `json:"closed"`
		Nodes   []jsonNode  `json:"nodes"`
		Totals  ringTotals  `json:"totals"`
		Issues  []jsonIssue `json:"issues"`
	}{OK: len(r.Errors()) == 0, Command: "ring", Closed: r.Closed, Nodes: []jsonNode{}, Totals: totals(r), Issues: []jsonIssue{}}
	for _, n := range r.Nodes {
		j := nodeJSON(n.Status, hexMode)
		j.ID = n.Peer.ID.String() // the peer dialled; a mismatch with self is an issue
		out.Nodes = append(out.Nodes, j)
	}
	for _, i := range r.Issues {
		ji := jsonIssue{Severity: string(i.Severity), At: i.At, Message: i.Msg}
		if i.Node != "" {
			ji.Node = i.Node.String()
		}
		if i.Err != nil {
			ji.Class = client.Class(i.Err)
		}
		out.Issues = append(out.Issues, ji)
	}
	return out
}

// renderRing prints the ring table, the load bars, the totals and the issues.
func renderRing(w io.Writer, r *client.Ring, hexMode, ascii bool, width int) {
	t := &table{
		header: []string{"#", "node", "range", "items", "load", "thres", "locked", "state"},
		right:  []bool{true, false, false, true, true, true, false, false},
	}
	for i, n := range r.Nodes {
		st := n.Status
		load := num(st.GetLoad())
		if overloaded(st) {
			load += "*"
		} else {
			load += " "
		}
		lock := "-"
		if st.GetLocked() {
			lock = fmt.Sprintf("wave %d", st.GetLockWave())
		}
		t.add(fmt.Sprint(i), client.ShortID(n.Peer.ID), showRange(st.GetRange(), hexMode),
			fmt.Sprint(st.GetItems()), load, num(st.GetThres()), lock, orDash(st.GetState()))
	}
	t.render(w, "")

	fmt.Fprintln(w)
	loads := make([]float64, len(r.Nodes))
	labels := make([]string, len(r.Nodes))
	marks := make([]string, len(r.Nodes))
	for i, n := range r.Nodes {
		loads[i] = n.Status.GetLoad()
		labels[i] = fmt.Sprintf("%d %s", i, client.ShortID(n.Peer.ID))
		if overloaded(n.Status) {
			marks[i] = "*"
		}
	}
	fmt.Fprintf(w, "load per node (bars scaled to the highest load; * load > thres)\n")
	renderBars(w, labels, loads, marks, width, ascii)

	tot := totals(r)
	fmt.Fprintf(w, "\nnodes %d   items %d   lost items %d   overloaded %d   locked %d   load %s\n",
		tot.Nodes, tot.Items, tot.LostItems, tot.Overloaded, tot.Locked, num(tot.Load))
	switch {
	case r.Closed && len(r.Issues) == 0:
		fmt.Fprintln(w, "ring closed: every successor link leads back to the entry node")
	case r.Closed:
		fmt.Fprintln(w, "ring closed, with warnings:")
	default:
		fmt.Fprintln(w, "ring NOT closed:")
	}
	for _, i := range r.Issues {
		fmt.Fprintf(w, "  %s\n", i)
	}
}

// Eighth blocks for sub-cell precision in Unicode bars.
var eighths = []string{"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"}

// renderBars draws one horizontal bar per value, the longest width columns wide, the others
// scaled to it, each followed by its value and its mark.
func renderBars(w io.Writer, labels []string, values []float64, marks []string, width int, ascii bool) {
	hi := 0.0
	for _, v := range values {
		if v > hi && !math.IsInf(v, 1) {
			hi = v
		}
	}
	lw := 0
	for _, l := range labels {
		lw = max(lw, utf8.RuneCountInString(l))
	}
	sep := "│"
	if ascii {
		sep = "|"
	}
	for i, v := range values {
		bar := ""
		if hi > 0 && v > 0 {
			cells := math.Min(v/hi, 1) * float64(width)
			if ascii {
				bar = strings.Repeat("#", int(math.Round(cells)))
			} else {
				full := int(cells)
				bar = strings.Repeat("█", full) + eighths[int((cells-float64(full))*8)]
			}
		}
		pad := width - utf8.RuneCountInString(bar)
		fmt.Fprintf(w, "%s%s %s%s%s %s%s\n", labels[i], strings.Repeat(" ", lw-utf8.RuneCountInString(labels[i])),
			sep, bar, strings.Repeat(" ", max(pad, 0)), num(v), marks[i])
	}
	if hi == 0 && len(values) > 0 {
		fmt.Fprintln(w, "(every load is 0)")
	}
}

// table is a plain text table aligned by rune count.
type table struct {
	header []string
	right  []bool // right-align column i
	rows   [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) render(w io.Writer, indent string) {
	widths := make([]int, len(t.header))
	for i, h := range t.header {
		widths[i] = utf8.RuneCountInString(h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		b.WriteString(indent)
		for i, c := range cells {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i > 0 {
				b.WriteString("  ")
			}
			if i < len(t.right) && t.right[i] {
				b.WriteString(pad + c)
			} else if i < len(cells)-1 {
				b.WriteString(c + pad)
			} else {
				b.WriteString(c)
			}
		}
		fmt.Fprintln(w, b.String())
	}
	line(t.header)
	for _, r := range t.rows {
		line(r)
	}
}
