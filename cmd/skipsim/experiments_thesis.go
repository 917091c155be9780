package main

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/skiprange/skiprange/nixmig"
	"github.com/skiprange/skiprange/testnet/report"
	"github.com/skiprange/skiprange/testnet/workload"
)

// The thesis's numbers (SPEC §13), set beside ours.
var (
	// thesisGrid is Table 4.2: items/messages/time by overThres and ttl.
	thesisGrid = map[[2]int]string{
		{160, 1}: "62K/21K/92", {160, 3}: "74K/21K/93", {160, 5}: "85K/22K/170", {160, 10}: "134K/39K/554",
		{280, 1}: "68K/23K/114", {280, 3}: "79K/22K/120", {280, 5}: "80K/20K/117", {280, 10}: "80K/18K/147",
		{400, 1}: "66K/22K/116", {400, 3}: "71K/21K/108", {400, 5}: "70K/19K/77", {400, 10}: "80K/20K/173",
		{500, 1}: "69K/23K/147", {500, 3}: "71K/20K/105", {500, 5}: "71K/20K/105", {500, 10}: "80K/20K/166",
	}
	// thesisScale is Table 4.3: messages/time/items ratios to 500 nodes, by the factor of nodes.
	thesisScale = map[int]string{10: "×13 / ×1.2 / ×1.05", 50: "×102 / ×2.2 / ×0.96", 100: "×208 / ×2.8 / ×0.98"}
	// thesisWords is Table 4.7 (AOL prefix queries): time, messages, MIG:NIX by prefix length.
	thesisWords = map[int][3]string{4: {"134", "16.4K", "0.30"}, 5: {"140", "17.9K", "0.32"}, 10: {"150", "18.5K", "0.34"}}
)

func grid(e *expEnv) error {
	overs := e.choose([]float64{160, 280, 400, 500}, []float64{160, 400})
	ttls := e.choose([]float64{1, 3, 5, 10}, []float64{1, 5})
	pts := make([][]*point, len(ttls)) // [ttl][overThres]
	for t, ttl := range ttls {
		for _, over := range overs {
			p := newParams(e.runFlags, pulse(e.keys, 10))
			// The thesis's fixed ttl: no wave grows past it (nixmig.Config.TTLMax).
			b := &p.Net.Node.Balance
			b.OverThres, b.TTL, b.TTLMax = over, int(ttl), 0
			pts[t] = append(pts[t], e.add(fmt.Sprintf("overThres %g ttl %g", over, ttl), p))
		}
	}
	if err := e.runAll(); err != nil {
		return err
	}
	tab := &report.Table{Title: "Items / messages / time (s) by overThres and ttl, 10% pulse (Table 4.2)", Header: []string{"overThres"}}
	for _, ttl := range ttls {
		tab.Header = append(tab.Header, fmt.Sprintf("ttl %g", ttl), fmt.Sprintf("thesis ttl %g", ttl))
	}
	var groups, series []string
	for o, over := range overs {
		row := []any{fmt.Sprintf("%g", over)}
		for t, ttl := range ttls {
			pt := pts[t][o]
			items, _ := meanSD(itemsOf(pt))
			msgs, _ := meanSD(messagesOf(pt))
			sec, _ := meanSD(timeOf(pt))
			mark := ""
			if unfinished(pt) > 0 {
				mark = "*"
			}
			row = append(row, fmt.Sprintf("%s/%s/%.0f%s", kilo(items), kilo(msgs), sec, mark), thesisCell(thesisGrid[[2]int{int(over), int(ttl)}]))
		}
		tab.AddRow(row...)
		groups = append(groups, fmt.Sprintf("overThres %g", over))
	}
	for _, ttl := range ttls {
		series = append(series, fmt.Sprintf("ttl %g", ttl))
	}
	tab.Notes = append(tab.Notes, "Cells are means over the seeds (runs.csv has every run). Thesis: 500 nodes, 50,000 keys; best overThres 400, ttl 5 → 70K/19K/77.")
	return e.conclude(tab, "overThres", groups, series, pts, itemsChart, messagesChart, timeChart)
}

// thesisCell shows a missing thesis value as "-".
func thesisCell(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func scale(e *expEnv) error {
	full := e.def.full
	if e.full {
		full = append(full[:len(full):len(full)], 25_000, 50_000)
	}
	sizes := e.choose(full, e.def.quick)
	var pts []*point
	var joins []string // the time between joins of each point, for the table's notes
	for _, n := range sizes {
		if n != math.Trunc(n) || n < 2 {
			return badUsage("--points: %g is not a number of nodes", n)
		}
		r := e.runFlags
		r.nodes = int(n)
		r.keys = int(math.Round(float64(e.keys) * n / float64(e.nodes)))
		r.rate = e.rate * n / float64(e.nodes)
		if !e.joinGiven {
			r.joinInterval = scaleJoinInterval(e.joinInterval, r.nodes)
		}
		joins = append(joins, fmt.Sprintf("%v at %d", r.joinInterval, r.nodes))
		pts = append(pts, e.add(fmt.Sprintf("%d nodes", r.nodes), newParams(r, pulse(r.keys, 10))))
	}
	if err := e.runAll(); err != nil {
		return err
	}
	tab := &report.Table{Title: "Scalability, 10% pulse (Table 4.3)", Header: []string{"nodes", "keys", "queries/s",
		"messages", "time (s)", "items", "messages ×", "time ×", "items ×", "thesis messages / time / items ×"}}
	var groups []string
	for _, pt := range pts {
		p := pt.params
		factor := float64(p.Nodes) / float64(pts[0].params.Nodes)
		thesis := "-"
		if factor == math.Trunc(factor) {
			thesis = thesisCell(thesisScale[int(factor)])
		}
		tab.AddRow(p.Nodes, p.Keys, p.Rate, cell(messagesOf(pt)), timeCell(pt), cell(itemsOf(pt)),
			ratioCell(pt, pts[0], messagesOf), ratioCell(pt, pts[0], timeOf), ratioCell(pt, pts[0], itemsOf), thesis)
		groups = append(groups, fmt.Sprint(p.Nodes))
	}
	tab.Notes = append(tab.Notes, "Keys and query rate grow with the nodes (the --keys and --rate of --nodes nodes); ratios are to the first row, seed by seed. Thesis: 5M keys, ratios to 500 nodes.",
		"Time between joins while the overlay is built: "+strings.Join(joins, ", ")+" nodes.")
	return e.conclude(tab, "nodes", groups, []string{"nixmig"}, [][]*point{pts}, messagesChart, timeChart, itemsChart)
}

// scaleBuild is the longest virtual time a scale point's build takes unless --join-interval is
// given: at the default 50 ms between joins, 50,000 joins took 2,500 s of virtual time, each
// second with every node's maintenance, where 5 ms builds the overlay the runs of RESULTS.md use.
const scaleBuild = 250 * time.Second

// scaleJoinInterval is the time between joins at a scale point of nodes nodes: the default
// interval, or closer so that the build takes at most scaleBuild.
func scaleJoinInterval(interval time.Duration, nodes int) time.Duration {
	return min(interval, scaleBuild/time.Duration(nodes))
}

func unl(e *expEnv) error {
	widths := e.choose(e.def.full, e.def.quick)
	variants := []string{"SmartUNL", "random probing"}
	pts := make([][]*point, len(variants)) // [variant][width]
	var groups []string
	for _, w := range widths {
		groups = append(groups, fmt.Sprintf("%g%%", w))
		for v, name := range variants {
			p := newParams(e.runFlags, pulse(e.keys, w))
			p.Net.Node.Balance.SmartUNL = v == 0
			pts[v] = append(pts[v], e.add(fmt.Sprintf("%s pulse %g%%", name, w), p))
		}
	}
	if err := e.runAll(); err != nil {
		return err
	}
	tab := &report.Table{Title: "SmartUNL against random probing on pulses (Table 4.5)", Header: []string{"pulse"}}
	for _, v := range variants {
		tab.Header = append(tab.Header, "probes ("+v+")", "success ("+v+")", "time (s) ("+v+")")
	}
	for w := range widths {
		row := []any{groups[w]}
		for v := range variants {
			pt := pts[v][w]
			row = append(row, cell(probesOf(pt)), cell(successOf(pt)), timeCell(pt))
		}
		tab.AddRow(row...)
	}
	tab.Notes = append(tab.Notes,
		"Success: remote tries accepted ÷ remote tries.",
		"Thesis (500 nodes, pulses 5–25%): SmartUNL ~160–240 probe messages at 60–71% success; random probing 2.8K–3.7K at 5–6%.")
	return e.conclude(tab, "pulse", groups, variants, pts,
		chart{"probes.svg", "probe messages", probesOf},
		chart{"success.svg", "remote tries accepted ÷ tries", successOf}, timeChart)
}

func rnp(e *expEnv) error {
	percents := e.choose(e.def.full, e.def.quick)
	places := []nixmig.Placement{nixmig.PlaceSmart, nixmig.PlaceRandom, nixmig.PlaceAdversarial}
	names := []string{"SmartRNP", "random", "adversarial"}
	pts := make([][]*point, len(places)) // [placement][percent]
	var groups []string
	for _, pc := range percents {
		groups = append(groups, fmt.Sprintf("%g%%", pc))
		for i, place := range places {
			p := newParams(e.runFlags, hotRanges(e.keys, pc))
			p.Net.Node.Balance.Placement = place
			pts[i] = append(pts[i], e.add(fmt.Sprintf("%s hot %g%%", names[i], pc), p))
		}
	}
	if err := e.runAll(); err != nil {
		return err
	}
	tab := &report.Table{Title: "SmartRNP against random and adversarial placement on hot ranges (Table 4.6)",
		Header: []string{"hot", "migrants' items (SmartRNP)", "(random)", "(adversarial)", "SmartRNP ÷ random", "SmartRNP ÷ adversarial",
			"all items (SmartRNP)", "(random)", "(adversarial)", "SmartRNP ÷ random", "time (s) (SmartRNP)"}}
	for i := range percents {
		s, r, a := pts[0][i], pts[1][i], pts[2][i]
		tab.AddRow(groups[i], cell(migrantItemsOf(s)), cell(migrantItemsOf(r)), cell(migrantItemsOf(a)),
			ratioCell(s, r, migrantItemsOf), ratioCell(s, a, migrantItemsOf),
			cell(itemsOf(s)), cell(itemsOf(r)), cell(itemsOf(a)), ratioCell(s, r, itemsOf), timeCell(s))
	}
	tab.Notes = append(tab.Notes,
		"Migrants' items: the items migrants took from their targets when they joined next to them — the piece whose side SmartRNP chooses, which is what the thesis's Table 4.6 counts (\"exchanged keys due to a MIG operation\"). All items: every balancing handoff, leave hand-overs and NIX chains included.",
		"Thesis (500 nodes, hot ranges 10–50%): 5.3K–7.2K items with SmartRNP; ratio to random placement 0.47–0.71, to adversarial 0.16–0.53.")
	return e.conclude(tab, "hot ranges", groups, names, pts,
		chart{"migrant-items.svg", "items migrants took from their targets", migrantItemsOf}, itemsChart)
}

func wordsExperiment(e *expEnv) error {
	words, err := loadWords(e.words, e.keys, e.nodes)
	if err != nil {
		return err
	}
	var pts []*point
	var groups []string
	for _, n := range e.choose(e.def.full, e.def.quick) {
		if n != math.Trunc(n) || n < 1 {
			return badUsage("--points: %g is not a prefix length", n)
		}
		p := newParams(e.runFlags, nil)
		p.Words, p.PrefixLen = words, int(n)
		// A prefix query covers a varying number of words: the rate is set so that the total
		// load is that of --rate queries of 100 keys, as for the integer workloads.
		perQuery := 0.0
		for _, l := range words.KeyLoads(1, p.PrefixLen) {
			perQuery += l
		}
		p.Rate = e.rate * workload.DefaultRangeKeys / perQuery
		groups = append(groups, fmt.Sprintf("prefix %g", n))
		pts = append(pts, e.add(groups[len(groups)-1], p))
	}
	if err := e.runAll(); err != nil {
		return err
	}
	tab := &report.Table{Title: fmt.Sprintf("Prefix queries over %d words (Table 4.7)", words.Len()),
		Header: []string{"prefix", "queries/s", "time (s)", "messages", "items", "MIG:NIX", "thesis time (s)", "thesis messages", "thesis MIG:NIX"}}
	for i, pt := range pts {
		th, ok := thesisWords[pt.params.PrefixLen]
		if !ok {
			th = [3]string{"-", "-", "-"}
		}
		tab.AddRow(pt.params.PrefixLen, pt.params.Rate, timeCell(pt), cell(messagesOf(pt)), cell(itemsOf(pt)), cell(migNixOf(pt)), th[0], th[1], th[2])
		tab.Notes = append(tab.Notes, fmt.Sprintf("Workload %s: %s.", groups[i], pt.res[0].Feasibility))
	}
	tab.Notes = append(tab.Notes, fmt.Sprintf("Words: the %d most frequent of %s. Queries/s: the total load equals that of --rate queries of 100 keys. Thesis: AOL query log, 500 nodes.", words.Len(), e.words))
	return e.conclude(tab, "prefix length", groups, []string{"nixmig"}, [][]*point{pts}, timeChart, messagesChart)
}
