package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skiprange/skiprange/testnet/sim"
)

// tinyExperiment runs experiment name at the size of tinyBalance, writing into dir.
func tinyExperiment(name, dir string, flags ...string) []string {
	return append([]string{"experiment", name, "--quick", "--nodes", "20", "--rate", "10", "--warmup", "60s",
		"--duration", "400s", "--out", dir}, flags...)
}

func TestExperimentHelp(t *testing.T) {
	code, stdout, stderr := runCLI(t, "experiment", "--help")
	if code != 0 || stderr != "" {
		t.Errorf("exit %d, stderr %q; want 0 and nothing", code, stderr)
	}
	for _, d := range experiments {
		wantIn(t, "help", stdout, "  "+d.name+" ")
	}
	wantIn(t, "help", stdout, "Usage: skipsim experiment NAME", "--quick", "runs.csv", "Examples:")

	code, stdout, _ = runCLI(t, "experiment", "sweep-pulse", "--help")
	if code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	wantIn(t, "sweep-pulse help", stdout, "Usage: skipsim experiment sweep-pulse", "default 3,5,10,20,30,50, with --quick 10,30",
		"Example:", "-seeds", "(default 3)", "-parallel", "-points", "(default 4000s)")
}

func TestExperimentBadFlags(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"no name", []string{"experiment"}, []string{"which experiment?", "sweep-pulse", "faults"}},
		{"unknown", []string{"experiment", "frob"}, []string{`unknown experiment "frob"`, "sweep-zipf"}},
		{"points on grid", tinyExperiment("grid", dir, "--points", "5"), []string{"grid takes no --points"}},
		{"full on sweep", tinyExperiment("sweep-pulse", dir, "--full"), []string{"--full does not apply to sweep-pulse"}},
		{"words on grid", tinyExperiment("grid", dir, "--words", "w.txt"), []string{"--words does not apply to grid"}},
		{"seeds zero", tinyExperiment("faults", dir, "--seeds", "0"), []string{"--seeds", "at least 1"}},
		{"parallel zero", tinyExperiment("faults", dir, "--parallel", "0"), []string{"--parallel", "at least 1"}},
		{"points not numbers", tinyExperiment("unl", dir, "--points", "5,abc"), []string{"--points", `"abc"`}},
		{"width out of range", tinyExperiment("sweep-pulse", dir, "--points", "0"), []string{"Width = 0"}},
		{"theta zero", tinyExperiment("sweep-zipf", dir, "--points", "1,0"), []string{"zipf θ must be positive", "got 0"}},
		{"infeasible point", tinyExperiment("sweep-pulse", dir, "--points", "0.01", "--rate", "500"), []string{"cannot be balanced", "infeasible"}},
		{"nodes not whole", tinyExperiment("scale", dir, "--points", "10.5"), []string{"10.5 is not a number of nodes"}},
		{"words missing", tinyExperiment("words", dir), []string{"--words FILE", "../shared/data/en_50k.txt"}},
		{"words unreadable", tinyExperiment("words", dir, "--words", "/nonexistent"), []string{"/nonexistent", "../shared/data/en_50k.txt"}},
		{"warmup zero", tinyExperiment("faults", dir, "--warmup", "0"), []string{"--warmup must be positive", "load window"}},
		{"keys below nodes", tinyExperiment("faults", dir, "--keys", "10"), []string{"10 keys for 20 nodes"}},
		{"duration below warmup", tinyExperiment("faults", dir, "--duration", "30s"), []string{"--duration (30s)"}},
		{"rate negative", tinyExperiment("faults", dir, "--rate", "-1"), []string{"--rate", "positive"}},
		{"stray argument", tinyExperiment("grid", dir, "extra"), []string{`unexpected argument "extra"`}},
		{"algorithms on grid", tinyExperiment("grid", dir, "--algorithms", "ib"), []string{"--algorithms does not apply to grid"}},
		{"unknown algorithm", tinyExperiment("sweep-zipf", dir, "--algorithms", "nixmig,frob"), []string{"--algorithms", `"frob" is not a balancer`}},
		{"algorithm none", tinyExperiment("sweep-pulse", dir, "--algorithms", "none"), []string{`"none" is not a balancer`}},
		{"algorithm twice", tinyExperiment("sweep-pulse", dir, "--algorithms", "ib,nixmig,ib"), []string{"--algorithms names ib twice"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			expectUsage(t, c.args, append(c.want, "skipsim experiment")...)
		})
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		t.Errorf("a usage error wrote files: %v", entries)
	}
}

// tableRows returns the data rows of the Markdown table in out, split into trimmed cells.
func tableRows(out string) [][]string {
	var rows [][]string
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if i < 2 || !strings.HasPrefix(l, "|") || strings.HasPrefix(l, "| ---") || !strings.HasPrefix(lines[i-1], "|") {
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(l, "|"), "|") {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows = append(rows, cells)
	}
	return rows
}

// countLines is the number of lines of a file.
func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Error(err)
		return 0
	}
	return strings.Count(string(b), "\n")
}

func TestSweepPulseQuick(t *testing.T) {
	dir := t.TempDir()
	stdout, stderr := runOK(t, tinyExperiment("sweep-pulse", dir, "--points", "10", "--parallel", "2")...)
	rows := tableRows(stdout)
	var algs []string
	for _, r := range rows {
		algs = append(algs, r[0])
		if r[1] != "10%" || len(r) != 13 {
			t.Errorf("row %v: want 13 cells for the 10%% pulse", r)
			continue
		}
		spec, _ := strconv.ParseFloat(r[5], 64)
		placement, err := strconv.ParseFloat(r[6], 64)
		if err != nil || placement > spec || placement <= 0 {
			t.Errorf("row %v: items ÷ placement bound %q should be positive and at most items ÷ SPEC's bound %q", r, r[6], r[5])
		}
		// The Weighted-Move reference balances this pulse (the ring's ranges cut into slices of
		// six keys): a ratio, not "-".
		if wm, err := strconv.ParseFloat(r[7], 64); err != nil || wm <= 0 {
			t.Errorf("row %v: items ÷ Weighted-Move %q should be a positive number", r, r[7])
		}
	}
	if strings.Join(algs, " ") != "nixmig nix mig ib threshold" {
		t.Errorf("rows are for %v, want one per algorithm:\n%s", algs, stdout)
	}
	if len(rows) == 5 {
		if ib := rows[3]; ib[9] != "-" || ib[12] != "-" {
			t.Errorf("the IB row has ratios to itself or a speed-up: %v", ib)
		}
		if nixmig := rows[0]; nixmig[12] == "-" || nixmig[9] == "-" {
			t.Errorf("the NIXMIG row lacks its ratios: %v", nixmig)
		}
		if threshold := rows[4]; threshold[9] == "-" || threshold[12] != "-" {
			t.Errorf("the threshold row lacks its ratios to IB or has a speed-up: %v", threshold)
		}
	}
	wantIn(t, "stdout", stdout, "time ÷ IB", "NIX time ÷ NIXMIG time", "Workload 10%: feasible",
		"Command: skipsim experiment sweep-pulse --quick --nodes 20", "Settings: 20 nodes, 2000 keys, 10 queries/s",
		"warm-up and load window 60s", "Invariant checks: ok in 5 of 5 runs.")
	// Progress goes to stderr, one line as each run starts and ends.
	wantIn(t, "stderr", stderr, "start nixmig 10% seed 1", "done ib 10% seed 1", "done threshold 10% seed 1", "5/5")
	if strings.Contains(stdout, "seed 1:") {
		t.Errorf("progress on stdout:\n%s", stdout)
	}
	if n := countLines(t, filepath.Join(dir, "runs.csv")); n != 6 {
		t.Errorf("runs.csv has %d lines, want a header and 5 runs", n)
	}
	if n := countLines(t, filepath.Join(dir, "sweep-pulse.csv")); n != 6 {
		t.Errorf("sweep-pulse.csv has %d lines, want a header and 5 rows", n)
	}
	if md, err := os.ReadFile(filepath.Join(dir, "sweep-pulse.md")); err != nil || string(md) != stdout {
		t.Errorf("sweep-pulse.md (%v) differs from the table printed:\n%s", err, md)
	}
	for _, name := range []string{"time.svg", "messages.svg", "items.svg"} {
		checkSVG(t, filepath.Join(dir, name))
	}
}

// TestSweepAlgorithms: --algorithms replaces a sweep's balancers; without IB or NIX only among
// them the columns of ratios to IB and of NIXMIG's speed-up go.
func TestSweepAlgorithms(t *testing.T) {
	dir := t.TempDir()
	stdout, _ := runOK(t, tinyExperiment("sweep-zipf", dir, "--points", "2", "--algorithms", "threshold, nixmig")...)
	rows := tableRows(stdout)
	if len(rows) != 2 || rows[0][0] != "threshold" || rows[1][0] != "nixmig" {
		t.Fatalf("rows %v, want threshold then nixmig:\n%s", rows, stdout)
	}
	for _, r := range rows {
		if len(r) != 9 {
			t.Errorf("row %v: want 9 cells, no ratios to IB", r)
		}
	}
	if strings.Contains(stdout, "÷ IB") || strings.Contains(stdout, "NIX time") {
		t.Errorf("columns for an algorithm not run:\n%s", stdout)
	}
}

// TestExperimentsSmoke runs every other experiment at the tiny size with few points.
func TestExperimentsSmoke(t *testing.T) {
	cases := []struct {
		name  string
		flags []string
		want  []string // in the table printed
		files []string // besides runs.csv and NAME.csv
	}{
		{"sweep-zipf", []string{"--points", "2"}, []string{"| nixmig", "| ib", "θ=2", "Workload θ=2: feasible"}, []string{"items.svg"}},
		{"grid", nil, []string{"thesis ttl 5", "70K/19K/77", "| 160 ", "| 400 "}, []string{"time.svg"}},
		{"scale", []string{"--points", "20,30"}, []string{"| 30 ", "3000", "messages ×", "Time between joins while the overlay is built: 50ms at 20, 50ms at 30 nodes."}, []string{"messages.svg"}},
		{"dynamic", nil, []string{"Gini at the end", "≈0.2", "Snapshots at [160 220 360] s"}, []string{"series.csv", "loads.svg", "gini.svg", "traffic.svg"}},
		{"unl", []string{"--points", "10"}, []string{"probes (SmartUNL)", "success (random probing)", "60–71%"}, []string{"probes.svg"}},
		{"rnp", []string{"--points", "20"}, []string{"SmartRNP ÷ adversarial", "migrants' items (SmartRNP)", "| 20%"}, []string{"items.svg", "migrant-items.svg"}},
		{"words", []string{"--points", "4", "--words", sharedWords}, []string{"thesis MIG:NIX", "| 4 ", "0.30", "Workload prefix 4"}, []string{"time.svg"}},
		{"faults", nil, []string{"1% message loss", "5% of nodes crash", "1/1"}, []string{"items.svg"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "words" {
				if _, err := os.Stat(sharedWords); err != nil {
					t.Skipf("the shared word list is absent (%v)", err)
				}
			}
			dir := t.TempDir()
			code, stdout, stderr := runCLI(t, tinyExperiment(c.name, dir, append(c.flags, "--quiet")...)...)
			if code != 0 {
				t.Fatalf("exit %d; stderr:\n%s\nstdout:\n%s", code, stderr, stdout)
			}
			wantIn(t, "stdout", stdout, append(c.want, "Command: skipsim experiment "+c.name, "Invariant checks: ok")...)
			for _, f := range append(c.files, "runs.csv", c.name+".csv", c.name+".md") {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// TestScaleJoinInterval: a scale point builds in at most 250 s of virtual time unless
// --join-interval is given, which then holds at every size.
func TestScaleJoinInterval(t *testing.T) {
	for _, c := range []struct {
		interval time.Duration
		nodes    int
		want     time.Duration
	}{
		{50 * time.Millisecond, 500, 50 * time.Millisecond},
		{50 * time.Millisecond, 5000, 50 * time.Millisecond},
		{50 * time.Millisecond, 25_000, 10 * time.Millisecond},
		{50 * time.Millisecond, 50_000, 5 * time.Millisecond},
		{time.Millisecond, 50_000, time.Millisecond},
	} {
		if got := scaleJoinInterval(c.interval, c.nodes); got != c.want {
			t.Errorf("scaleJoinInterval(%v, %d) = %v, want %v", c.interval, c.nodes, got, c.want)
		}
	}
	dir := t.TempDir()
	stdout, _ := runOK(t, tinyExperiment("scale", dir, "--points", "20", "--join-interval", "20s", "--quiet")...)
	wantIn(t, "stdout", stdout, "Time between joins while the overlay is built: 20s at 20 nodes.")
}

func TestMetrics(t *testing.T) {
	pt := &point{
		params: sim.BalanceParams{Duration: 400 * time.Second, Warmup: 60 * time.Second},
		res: []*sim.BalanceResult{
			{Seed: 1, Completed: true, CompletionTime: 100, Items: 30, LowerBound: 10, Check: "ok"},
			{Seed: 2, Items: 50, Check: "ok"},
		},
	}
	if got := timeOf(pt); got[0] != 100 || got[1] != 340 {
		t.Errorf("timeOf = %v, want [100 340]: an unfinished run counts its whole balancing period", got)
	}
	if got := timeCell(pt); got != "220 ± 169.7*" {
		t.Errorf("timeCell = %q, want the mean, spread and a mark for the unfinished run", got)
	}
	if got := cell(lbRatioOf(pt)); got != "3" {
		t.Errorf("items ÷ lower bound = %q, want 3 (the run without a lower bound left out)", got)
	}
	if got := ratioCell(pt, pt, migNixOf); got != "-" {
		t.Errorf("a ratio of undefined values = %q, want -", got)
	}
	if got := kilo(70_400); got != "70.4K" {
		t.Errorf("kilo(70400) = %q", got)
	}
}

func TestExperimentFailedCheck(t *testing.T) {
	e := &expEnv{seeds: 2, pts: []*point{{name: "nixmig 10%", res: []*sim.BalanceResult{
		{Seed: 1, Check: "ok"}, {Seed: 2, Check: "[3 nodes still locked]"}}}}}
	if note := e.checkNote(); !strings.Contains(note, "FAILED in 1 of 2 runs") {
		t.Errorf("note %q does not report the failed check", note)
	}
	err := e.failures()
	if !errors.Is(err, errFailed) || !strings.Contains(err.Error(), "nixmig 10% seed 2: [3 nodes still locked]") {
		t.Errorf("failures() = %v, want errFailed naming the run", err)
	}
	e.pts[0].res[1].Check = "ok"
	if err := e.failures(); err != nil {
		t.Errorf("failures() = %v with every check ok", err)
	}
}

// TestExperimentParallelSameTable checks that running several runs at once changes nothing.
func TestExperimentParallelSameTable(t *testing.T) {
	table := func(parallel string) string {
		t.Helper()
		code, stdout, stderr := runCLI(t, tinyExperiment("faults", t.TempDir(), "--seeds", "2", "--parallel", parallel, "--quiet")...)
		if code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", code, stderr)
		}
		var keep []string
		for _, l := range strings.Split(stdout, "\n") {
			if !strings.HasPrefix(l, "Command: ") { // names --parallel and the directory
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	one, three := table("1"), table("3")
	if one != three {
		t.Errorf("--parallel 1 and 3 gave different tables:\n%s\n----\n%s", one, three)
	}
	if !strings.Contains(one, " ± ") {
		t.Errorf("two seeds gave no spread:\n%s", one)
	}
}

// TestRunReport: a run of an experiment reports its phase at most once per interval of wall
// time, with the nodes over thres once balancing began.
func TestRunReport(t *testing.T) {
	now := time.Unix(1000, 0)
	var lines []string
	r := &runReport{name: "50000 nodes seed 1", every: 30 * time.Second, now: func() time.Time { return now }, last: now, over: -1,
		emit: func(line string) { lines = append(lines, line) }}
	r.progress("build", 10, 50000) // at the start: nothing
	now = now.Add(31 * time.Second)
	r.progress("build", 20000, 50000)
	now = now.Add(10 * time.Second)
	r.progress("warm-up", 100, 4000) // 10 s after the last line: nothing
	now = now.Add(25 * time.Second)
	r.over = 1520
	r.progress("balancing", 850, 4000)
	want := []string{"50000 nodes seed 1: build 20000/50000", "50000 nodes seed 1: balancing 850/4000, 1520 nodes over thres"}
	if !slices.Equal(lines, want) {
		t.Errorf("lines %q, want %q", lines, want)
	}
}
