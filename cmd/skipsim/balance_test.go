package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skiprange/skiprange/testnet/sim"
)

// tinyBalance is a complete balancing run that takes about a second: 20 nodes, 100 keys each,
// mean load 50 against thres 60, and a 10% pulse that overloads a few of them.
var tinyBalance = []string{"balance", "--nodes", "20", "--keys", "2000", "--rate", "10", "--window", "60s",
	"--warmup", "60s", "--duration", "600s", "--quiet"}

func tinyBalanceWith(flags ...string) []string {
	return append(append([]string(nil), tinyBalance...), flags...)
}

// sharedWords is the project's word list as seen from this package's directory.
const sharedWords = "../../../shared/data/en_50k.txt"

func TestBalanceHelp(t *testing.T) {
	code, stdout, stderr := runCLI(t, "balance", "--help")
	if code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	wantIn(t, "help", stdout, "Usage: skipsim balance", "Examples:", "skipsim balance --workload pulse",
		"-workload", "-algorithm", "(default 500)", "(default 4000s)", "result.json", "series.csv", "loads.svg")
	if stderr != "" {
		t.Errorf("stderr not empty: %q", stderr)
	}
}

// expectUsage runs args and checks for exit 2, nothing on stdout, and every want on stderr with
// a pointer to --help but not the whole help.
func expectUsage(t *testing.T, args []string, want ...string) {
	t.Helper()
	code, stdout, stderr := runCLI(t, args...)
	if code != 2 {
		t.Errorf("exit %d, want 2; stderr:\n%s", code, stderr)
	}
	if stdout != "" {
		t.Errorf("stdout not empty:\n%s", stdout)
	}
	wantIn(t, "stderr", stderr, append(want, "--help' for usage")...)
	if strings.Contains(stderr, "Example") {
		t.Errorf("a usage error should not dump the whole help:\n%s", stderr)
	}
}

// wantIn checks that text (called what) holds every want.
func wantIn(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, text)
		}
	}
}

func TestBalanceBadFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"nodes one", []string{"--nodes", "1"}, []string{"--nodes", "at least 2", "got 1"}},
		{"keys below nodes", []string{"--keys", "10"}, []string{"--keys", "10 keys for 20 nodes"}},
		{"rate zero", []string{"--rate", "0"}, []string{"--rate", "positive", "got 0"}},
		{"rate NaN", []string{"--rate", "NaN"}, []string{"--rate", "NaN"}},
		{"rate infinite", []string{"--rate", "Inf"}, []string{"--rate", "positive"}},
		{"width zero", []string{"--width", "0"}, []string{"--width", "(0,1]", "got 0"}},
		{"width above one", []string{"--width", "1.5"}, []string{"--width", "(0,1]"}},
		{"percent zero", []string{"--percent", "0"}, []string{"--percent", "(0,100]"}},
		{"theta negative", []string{"--theta", "-1"}, []string{"--theta", "got -1"}},
		{"theta NaN", []string{"--theta", "NaN"}, []string{"--theta", "NaN"}},
		{"theta zero", []string{"--theta", "0"}, []string{"--theta", "(0,inf)", "got 0"}},
		{"thresholds not numbers", []string{"--thresholds", "30,lots"}, []string{"--thresholds", `"lots"`}},
		{"thresholds zero", []string{"--thresholds", "60,0"}, []string{"--thresholds", "positive", `"0"`}},
		{"thresholds empty item", []string{"--thresholds", "60,"}, []string{"--thresholds", `""`}},
		{"a key over thres", []string{"--workload", "pulse", "--width", "0.001", "--rate", "70"}, []string{"cannot be balanced", "infeasible: key", "≥ thres 60"}},
		{"too few nodes", []string{"--rate", "80"}, []string{"cannot be balanced", "infeasible:", "nodes needed of 20"}},
		{"a key over every thres", []string{"--workload", "pulse", "--width", "0.001", "--rate", "70", "--thresholds", "30,60"}, []string{"cannot be balanced", "the highest thres 60"}},
		{"a zero", []string{"--a", "0"}, []string{"--a", "(0,1]"}},
		{"headroom one", []string{"--headroom", "1"}, []string{"--headroom", "[0,1)"}},
		{"loss one", []string{"--loss", "1"}, []string{"--loss", "[0,1)", "got 1"}},
		{"loss NaN", []string{"--loss", "NaN"}, []string{"--loss", "NaN"}},
		{"crash one", []string{"--crash", "1"}, []string{"--crash", "[0,1)"}},
		{"crash negative", []string{"--crash", "-0.1"}, []string{"--crash", "got -0.1"}},
		{"pause one", []string{"--pause", "1", "--pause-for", "30s"}, []string{"--pause", "[0,1)"}},
		{"pause without a time", []string{"--pause", "0.1"}, []string{"--pause-for", "positive"}},
		{"pause-for negative", []string{"--pause-for", "-1s"}, []string{"--pause-for", "negative"}},
		{"clients negative", []string{"--clients", "-1"}, []string{"--clients", "0 or more"}},
		{"clients not a number", []string{"--clients", "NaN"}, []string{"--clients", "0 or more"}},
		{"pause and crash all", []string{"--crash", "0.5", "--pause", "0.5", "--pause-for", "30s"}, []string{"--crash and --pause", "under 1"}},
		{"thres zero", []string{"--thres", "0"}, []string{"--thres", "positive"}},
		{"over-thres below thres", []string{"--thres", "60", "--over-thres", "50"}, []string{"--over-thres", "exceed --thres"}},
		{"ttl zero", []string{"--ttl", "0"}, []string{"--ttl", "[1, 63]", "got 0"}},
		{"ttl past a message's node list", []string{"--ttl", "64"}, []string{"--ttl", "[1, 63]", "got 64"}},
		{"largest ttl negative", []string{"--ttl-max", "-1"}, []string{"--ttl-max", "[0, 63]", "got -1"}},
		{"largest ttl past a message's node list", []string{"--ttl-max", "64"}, []string{"--ttl-max", "[0, 63]", "got 64"}},
		{"delta one", []string{"--algorithm", "threshold", "--delta", "1"}, []string{"--delta", "(1, 16]", "got 1"}},
		{"delta NaN", []string{"--delta", "NaN"}, []string{"--delta", "(1, 16]"}},
		{"samples negative", []string{"--samples", "-1"}, []string{"--samples", "[0, 64]", "got -1"}},
		{"request timeout zero", []string{"--request-timeout", "0s"}, []string{"--request-timeout", "must be positive"}},
		{"queries unknown", []string{"--queries", "teleported"}, []string{"--queries", "routed or direct", "teleported"}},
		{"join interval zero", []string{"--join-interval", "0"}, []string{"--join-interval", "must be positive"}},
		{"buckets zero", []string{"--buckets", "0"}, []string{"--buckets"}},
		{"range keys zero", []string{"--range-keys", "0"}, []string{"--range-keys"}},
		{"prefix zero", []string{"--prefix", "0"}, []string{"--prefix"}},
		{"duration zero", []string{"--duration", "0"}, []string{"--duration", "positive"}},
		{"duration not a time", []string{"--duration", "soon"}, []string{"-duration", "700s"}},
		{"duration below warmup", []string{"--duration", "50s"}, []string{"--duration (50s) must exceed --warmup (60s)"}},
		{"warmup negative", []string{"--warmup", "-1s"}, []string{"--warmup", "negative"}},
		{"stop-after negative", []string{"--stop-after", "-5"}, []string{"--stop-after", "negative"}},
		{"sample zero", []string{"--sample", "0"}, []string{"--sample", "whole number of seconds"}},
		{"sample fractional", []string{"--sample", "2.5s"}, []string{"--sample", "got 2.5s"}},
		{"window negative", []string{"--window", "-1s"}, []string{"--window", "negative"}},
		{"window defaults to zero warmup", []string{"--warmup", "0", "--window", "0"}, []string{"--window", "positive"}},
		{"crash-after negative", []string{"--crash-after", "-1s"}, []string{"--crash-after", "negative"}},
		{"algorithm", []string{"--algorithm", "magic"}, []string{"--algorithm", `"magic"`, "nixmig"}},
		{"workload", []string{"--workload", "tides"}, []string{"--workload", `"tides"`, "pulse"}},
		{"unl", []string{"--unl", "psychic"}, []string{"--unl", "random, smart"}},
		{"rnp", []string{"--rnp", "left"}, []string{"--rnp", "adversarial, random, smart"}},
		{"words without file", []string{"--workload", "words"}, []string{"--words FILE", "../shared/data/en_50k.txt"}},
		{"words file missing", []string{"--workload", "words", "--words", "/nonexistent/words.txt"}, []string{"/nonexistent/words.txt", "../shared/data/en_50k.txt"}},
		{"words with another workload", []string{"--words", "w.txt"}, []string{"--words needs --workload words"}},
		{"ring every part of a second", []string{"--ring-every", "2500ms"}, []string{"--ring-every must be a whole number of seconds"}},
		{"unknown flag", []string{"--frobnicate"}, []string{"frobnicate", "not defined"}},
		{"stray argument", []string{"extra"}, []string{`unexpected argument "extra"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			expectUsage(t, tinyBalanceWith(c.args...), append(c.want, "skipsim balance")...)
		})
	}
}

func TestBalanceWordsTooFew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "words.txt")
	if err := os.WriteFile(path, []byte("alpha 3\nbeta 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	expectUsage(t, tinyBalanceWith("--workload", "words", "--words", path), "2 words cannot be spread over 20 nodes")
}

func TestBalanceSummaryAndFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	stdout, stderr := runOK(t, tinyBalanceWith("--seed", "2", "--sample", "5s", "--ring-every", "10s", "--out", dir)...)
	wantIn(t, "summary", stdout, "skipsim balance: nixmig on pulse(10%), 20 nodes", "seed 2", "completion",
		"lower bound", "MIG:NIX", "Gini", "→", "feasible", "check", "ok")
	if stderr != "" {
		t.Errorf("--quiet run wrote to stderr:\n%s", stderr)
	}

	var doc struct {
		Command  string
		Settings map[string]string
		Result   sim.BalanceResult
	}
	raw, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("result.json: %v", err)
	}
	r := doc.Result
	if r.Check != "ok" || r.Seed != 2 || r.Algorithm != "nixmig" {
		t.Errorf("result: check %q, seed %d, algorithm %q", r.Check, r.Seed, r.Algorithm)
	}
	if r.OverloadedStart == 0 || r.Items == 0 || r.Messages == 0 {
		t.Errorf("nothing was balanced: %d overloaded at the start, %d items, %d messages", r.OverloadedStart, r.Items, r.Messages)
	}
	if doc.Settings["window"] != "60s" || doc.Settings["nodes"] != "20" || !strings.Contains(doc.Command, "--seed 2") {
		t.Errorf("parameters not echoed: %q %v", doc.Command, doc.Settings)
	}
	// The series has one row per sample, every --sample; the snapshots are at the warm-up's end
	// and at the end.
	csv, err := os.ReadFile(filepath.Join(dir, "series.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(csv)), "\n")
	if !strings.HasPrefix(lines[0], "algorithm,seed,t_s,gini") || len(lines) != len(r.Series)+1 || len(r.Series) < 5 {
		t.Errorf("series.csv has %d lines for %d samples, header %q", len(lines), len(r.Series), lines[0])
	}
	if len(r.Series) > 1 && r.Series[1].T-r.Series[0].T != 5 {
		t.Errorf("samples at %v and %v, want --sample 5s apart", r.Series[0].T, r.Series[1].T)
	}
	if len(r.Snapshots) != 2 || r.Snapshots[0].T != 60 {
		t.Errorf("snapshots %d, first at %v; want 2, first at 60", len(r.Snapshots), r.Snapshots)
	}
	for _, name := range []string{"loads.svg", "gini.svg", "overloaded.svg", "traffic.svg"} {
		checkSVG(t, filepath.Join(dir, name))
	}
	checkRing(t, r, filepath.Join(dir, "ring.csv"))
	checkPNG(t, filepath.Join(dir, "ring.png"))
}

// checkRing checks the --ring-every 10s records of a run with a 60 s warm-up: every 10 s from
// the warm-up on, starts in ring order, the same loads as the series' samples at those instants
// (whose mean they must reproduce), and ring.csv one row per node and record.
func checkRing(t *testing.T, r sim.BalanceResult, path string) {
	t.Helper()
	if len(r.Ring) < 3 {
		t.Fatalf("%d ring records, want one every 10 s of balancing", len(r.Ring))
	}
	rows := 0
	for i, sn := range r.Ring {
		rows += len(sn.Load)
		if sn.T != 60+10*float64(i) || len(sn.Start) != len(sn.Load) || len(sn.Load) == 0 {
			t.Errorf("ring record %d at %v s with %d starts and %d loads", i, sn.T, len(sn.Start), len(sn.Load))
			continue
		}
		sum := 0.0
		for j, l := range sn.Load {
			sum += l
			if j > 0 && sn.Start[j] < sn.Start[j-1] {
				t.Errorf("ring record at %v s: start %v after %v", sn.T, sn.Start[j], sn.Start[j-1])
			}
		}
		for _, smp := range r.Series {
			if smp.T == sn.T && math.Abs(smp.MeanLoad-sum/float64(len(sn.Load))) > 1e-9 {
				t.Errorf("at %v s the ring's mean load is %v, the series' %v", sn.T, sum/float64(len(sn.Load)), smp.MeanLoad)
			}
		}
	}
	csv, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(csv)), "\n")
	if lines[0] != "t_s,index,key_position,load" || len(lines) != rows+1 {
		t.Errorf("ring.csv has %d lines for %d rows, header %q", len(lines), rows, lines[0])
	}
}

// checkSVG fails unless path is an SVG image.
func checkSVG(t *testing.T, path string) {
	t.Helper()
	checkImage(t, path, "an SVG image", func(b []byte) bool { return strings.Contains(string(b[:min(len(b), 500)]), "<svg") })
}

// checkPNG fails unless path is a PNG image.
func checkPNG(t *testing.T, path string) {
	t.Helper()
	checkImage(t, path, "a PNG image", func(b []byte) bool { return bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) })
}

// checkImage fails unless path can be read and its bytes pass looksRight.
func checkImage(t *testing.T, path, kind string, looksRight func([]byte) bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Error(err)
		return
	}
	if !looksRight(b) {
		t.Errorf("%s is not %s: %.80q", path, kind, b)
	}
}

func TestBalanceJSONDeterministic(t *testing.T) {
	// decode runs tinyBalance with --json and returns the result and its JSON without wall time.
	decode := func(flags ...string) (sim.BalanceResult, string) {
		t.Helper()
		code, stdout, stderr := runCLI(t, tinyBalanceWith(append([]string{"--json"}, flags...)...)...)
		if code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", code, stderr)
		}
		var doc struct{ Result sim.BalanceResult }
		if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
			t.Fatalf("stdout is not the JSON result: %v\n%s", err, stdout)
		}
		doc.Result.Wall = 0
		j, err := json.Marshal(doc.Result)
		if err != nil {
			t.Fatal(err)
		}
		return doc.Result, string(j)
	}
	a, ja := decode("--algorithm", "nix", "--seed", "4")
	_, jb := decode("--algorithm", "nix", "--seed", "4")
	if ja != jb {
		t.Errorf("the same seed gave different results:\n%s\n%s", ja, jb)
	}
	if a.Algorithm != "nix" || a.MIG != 0 {
		t.Errorf("algorithm %q with %d migrations, want nix with none", a.Algorithm, a.MIG)
	}
	c, _ := decode("--algorithm", "nix", "--seed", "5")
	if c.Queries == a.Queries && c.Messages == a.Messages && c.Items == a.Items {
		t.Errorf("seeds 4 and 5 gave the same run: %d queries, %d messages, %d items", a.Queries, a.Messages, a.Items)
	}
}

func TestBalanceWords(t *testing.T) {
	if _, err := os.Stat(sharedWords); err != nil {
		t.Skipf("the shared word list is absent (%v)", err)
	}
	stdout, _ := runOK(t, tinyBalanceWith("--workload", "words", "--words", sharedWords, "--prefix", "4")...)
	wantIn(t, "summary", stdout, "words(2000 words, prefix 4)")
}

// --refuse reaches the network: with routed queries and a crash, queries that met a crashed node
// go on by another link (the result's rerouted, and a line of the summary); without it, none do.
func TestBalanceRefuse(t *testing.T) {
	run := func(flags ...string) sim.BalanceResult {
		t.Helper()
		args := tinyBalanceWith(append([]string{"--json", "--queries", "routed", "--crash", "0.2", "--crash-after", "10s", "--seed", "2"}, flags...)...)
		code, stdout, stderr := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", code, stderr)
		}
		var doc struct{ Result sim.BalanceResult }
		if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
			t.Fatalf("stdout is not the JSON result: %v\n%s", err, stdout)
		}
		return doc.Result
	}
	silent, refused := run(), run("--refuse")
	if silent.Rerouted != 0 {
		t.Errorf("without --refuse %d queries were rerouted", silent.Rerouted)
	}
	if refused.Rerouted == 0 {
		t.Errorf("with --refuse no query was rerouted (%d sent again after a timeout, %d without --refuse)", refused.QueryRetries, silent.QueryRetries)
	}
	if refused.Check != "ok" {
		t.Errorf("check %q", refused.Check)
	}
	code, stdout, stderr := runCLI(t, tinyBalanceWith("--queries", "routed", "--crash", "0.2", "--crash-after", "10s", "--seed", "2", "--refuse")...)
	if code != 0 || !strings.Contains(stdout, "sent on at once by another link") {
		t.Errorf("exit %d, summary without the refused line:\n%s%s", code, stdout, stderr)
	}
}
