package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/skiprange/skiprange/testnet/sim"
)

// runCLI calls run in-process and returns its exit status and outputs.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// runOK runs skipsim with args and stops the test unless it exits 0.
func runOK(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	code, stdout, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s\nstdout:\n%s", code, stderr, stdout)
	}
	return stdout, stderr
}

func TestNoArguments(t *testing.T) {
	code, stdout, stderr := runCLI(t)
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if stdout != "" {
		t.Errorf("stdout not empty: %q", stdout)
	}
	if !strings.Contains(stderr, "Usage:") || !strings.Contains(stderr, "overlay") {
		t.Errorf("stderr has no usage:\n%s", stderr)
	}
}

func TestHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h", "help"} {
		t.Run(arg, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, arg)
			if code != 0 {
				t.Errorf("exit %d, want 0", code)
			}
			if !strings.Contains(stdout, "Usage:") || !strings.Contains(stdout, "overlay") {
				t.Errorf("stdout has no usage:\n%s", stdout)
			}
			if stderr != "" {
				t.Errorf("stderr not empty: %q", stderr)
			}
		})
	}
}

func TestUnknownCommand(t *testing.T) {
	code, stdout, stderr := runCLI(t, "frobulate", "--nodes", "3")
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if stdout != "" {
		t.Errorf("stdout not empty: %q", stdout)
	}
	if !strings.Contains(stderr, `unknown command "frobulate"`) {
		t.Errorf("stderr does not name the command:\n%s", stderr)
	}
}

func TestOverlayHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		t.Run(arg, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "overlay", arg)
			if code != 0 {
				t.Errorf("exit %d, want 0", code)
			}
			for _, want := range []string{"Usage: skipsim overlay", "--nodes", "-keys", "-crash", "Example:", "skipsim overlay --nodes 1000"} {
				if !strings.Contains(stdout, want) {
					t.Errorf("help on stdout lacks %q:\n%s", want, stdout)
				}
			}
			if stderr != "" {
				t.Errorf("stderr not empty: %q", stderr)
			}
		})
	}
}

func TestOverlayBadFlags(t *testing.T) {
	// Small, valid settings in front of each case, so that a bad flag wrongly accepted would
	// still make only a short run; the case's flags come later and win.
	base := []string{"overlay", "--nodes", "20", "--keys", "200", "--lookups", "10", "--scans", "2", "--quiet"}
	cases := []struct {
		name string
		args []string
		want []string // substrings of stderr
	}{
		{"nodes zero", []string{"--nodes", "0"}, []string{"--nodes", "at least 1", "got 0"}},
		{"nodes negative", []string{"--nodes", "-3"}, []string{"--nodes", "at least 1", "got -3"}},
		{"keys below nodes", []string{"--nodes", "30", "--keys", "10"}, []string{"--keys", "--nodes", "10 keys for 30 nodes"}},
		{"crash one", []string{"--crash", "1"}, []string{"--crash", "[0,1)", "got 1"}},
		{"crash negative", []string{"--crash", "-0.1"}, []string{"--crash", "[0,1)", "got -0.1"}},
		{"crash NaN", []string{"--crash", "NaN"}, []string{"--crash", "NaN"}},
		{"leave above one", []string{"--leave", "1.5"}, []string{"--leave", "[0,1)", "got 1.5"}},
		{"leave NaN", []string{"--leave", "NaN"}, []string{"--leave", "NaN"}},
		{"leave plus crash", []string{"--leave", "0.6", "--crash", "0.5"}, []string{"--leave", "--crash", "below 1"}},
		{"loss one", []string{"--loss", "1"}, []string{"--loss", "[0,1)", "got 1"}},
		{"loss NaN", []string{"--loss", "NaN"}, []string{"--loss", "NaN"}},
		{"jitter negative", []string{"--jitter", "-1"}, []string{"--jitter", "negative", "got -1"}},
		{"jitter NaN", []string{"--jitter", "NaN"}, []string{"--jitter", "NaN"}},
		{"latency zero", []string{"--latency", "0"}, []string{"--latency", "positive", "got 0"}},
		{"latency overflows", []string{"--latency", "1e12"}, []string{"--latency", "too large"}},
		{"latency infinite", []string{"--latency", "Inf"}, []string{"--latency", "too large"}},
		{"latency below resolution", []string{"--latency", "1e-12"}, []string{"--latency", "resolution"}},
		{"join interval zero", []string{"--join-interval", "0"}, []string{"--join-interval", "positive"}},
		{"repair limit negative", []string{"--repair-limit", "-5"}, []string{"--repair-limit", "positive"}},
		{"probe interval zero", []string{"--probe-interval", "0"}, []string{"--probe-interval", "positive"}},
		{"refresh interval negative", []string{"--refresh-interval", "-1"}, []string{"--refresh-interval", "negative"}},
		{"batch zero", []string{"--batch", "0"}, []string{"--batch", "[1, 100000]"}},
		{"scan keys zero", []string{"--scan-keys", "0"}, []string{"--scan-keys"}},
		{"query rate zero", []string{"--query-rate", "0"}, []string{"--query-rate"}},
		{"lookups negative", []string{"--lookups", "-1"}, []string{"--lookups"}},
		{"unknown flag", []string{"--frobnicate"}, []string{"frobnicate", "not defined"}},
		{"stray argument", []string{"extra"}, []string{`unexpected argument "extra"`}},
		{"non-numeric nodes", []string{"--nodes", "abc"}, []string{"-nodes", `"abc"`}},
		{"non-numeric seed", []string{"--seed", "-1"}, []string{"-seed", `"-1"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			expectUsage(t, append(append([]string(nil), base...), c.args...), append(c.want, "skipsim overlay --help")...)
		})
	}
}

// smallRun is a complete run with leaves and a crash that takes a fraction of a second.
var smallRun = []string{"overlay", "--nodes", "30", "--keys", "3000", "--lookups", "300", "--scans", "30",
	"--leave", "0.1", "--crash", "0.1", "--quiet"}

func withFlags(flags ...string) []string {
	return append(append([]string(nil), smallRun...), flags...)
}

func TestOverlayText(t *testing.T) {
	code, stdout, stderr := runCLI(t, withFlags("--seed", "3")...)
	if code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s\nstdout:\n%s", code, stderr, stdout)
	}
	for _, want := range []string{"skipsim overlay: 30 nodes, 3000 keys, seed 3", "lookups", "crash", "invariant checks", "after crash repair"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "FAILED") || strings.Contains(stdout, "NOT repaired") {
		t.Errorf("run reports a failure:\n%s", stdout)
	}
	if stderr != "" {
		t.Errorf("--quiet run wrote to stderr:\n%s", stderr)
	}
}

// runJSON runs smallRun with --json and the given flags and decodes the summary.
func runJSON(t *testing.T, flags ...string) (raw string, sum sim.OverlaySummary, stderr string) {
	t.Helper()
	code, stdout, stderr := runCLI(t, withFlags(append([]string{"--json"}, flags...)...)...)
	if code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s\nstdout:\n%s", code, stderr, stdout)
	}
	if !json.Valid([]byte(stdout)) {
		t.Fatalf("stdout is not valid JSON:\n%s", stdout)
	}
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sum); err != nil {
		t.Fatalf("decoding the summary: %v\n%s", err, stdout)
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON value:\n%s", stdout)
	}
	return stdout, sum, stderr
}

func TestOverlayJSON(t *testing.T) {
	_, s, _ := runJSON(t, "--seed", "3")
	if s.Params.Nodes != 30 || s.Params.Keys != 3000 || s.Params.Seed != 3 || s.Params.Leave != 0.1 || s.Params.Crash != 0.1 {
		t.Errorf("params not echoed: %+v", s.Params)
	}
	if s.Lookups.Count != 300 || s.Scans.Count != 30 {
		t.Errorf("lookups %d scans %d, want 300 and 30", s.Lookups.Count, s.Scans.Count)
	}
	if s.Lookups.Wrong != 0 || s.Scans.Wrong != 0 || s.PostCrashLookups.Wrong != 0 {
		t.Errorf("wrong answers: lookups %d, scans %d, after crash %d", s.Lookups.Wrong, s.Scans.Wrong, s.PostCrashLookups.Wrong)
	}
	if s.Leaves == 0 || s.Crashed == 0 {
		t.Errorf("leaves %d, crashed %d: want both > 0", s.Leaves, s.Crashed)
	}
	if !s.BuildSettled || !s.Repaired {
		t.Errorf("settled %v, repaired %v: want both true", s.BuildSettled, s.Repaired)
	}
	if s.MissingAfterCrash != 0 {
		t.Errorf("%d surviving keys missing", s.MissingAfterCrash)
	}
	if len(s.Checks) == 0 {
		t.Fatal("no invariant checks in the summary")
	}
	for i, c := range s.Checks {
		if !c.OK {
			t.Errorf("Checks[%d] %q failed: %s", i, c.Phase, c.Detail)
		}
	}
	if s.Failed() {
		t.Error("summary reports Failed")
	}
}

// wallFields depend on the machine and the moment, not on the seed.
var wallFields = []string{`"wall_build":`, `"wall_load":`, `"wall_lookups":`, `"wall_scans":`, `"wall_seconds":`, `"messages_per_wall_second":`, `"peak_heap_mb":`}

// withoutWall removes the lines of the indented JSON holding wall-clock dependent fields.
func withoutWall(t *testing.T, raw string) string {
	t.Helper()
	var b strings.Builder
	removed := 0
	for _, line := range strings.SplitAfter(raw, "\n") {
		drop := false
		for _, f := range wallFields {
			if strings.HasPrefix(strings.TrimSpace(line), f) {
				drop = true
			}
		}
		if drop {
			removed++
			continue
		}
		b.WriteString(line)
	}
	if removed != len(wallFields) {
		t.Fatalf("removed %d wall-clock lines, want %d:\n%s", removed, len(wallFields), raw)
	}
	return b.String()
}

func TestOverlayDeterministic(t *testing.T) {
	a, sa, _ := runJSON(t, "--seed", "5")
	b, _, _ := runJSON(t, "--seed", "5")
	if withoutWall(t, a) != withoutWall(t, b) {
		t.Errorf("same seed, different output:\n%s\n----\n%s", a, b)
	}

	// A different seed must change the run itself, not just the echoed seed.
	c, sc, _ := runJSON(t, "--seed", "6")
	if withoutWall(t, a) == withoutWall(t, c) {
		t.Error("seeds 5 and 6 gave the same output")
	}
	for _, s := range []*sim.OverlaySummary{&sa, &sc} {
		s.Params.Seed = 0
		s.WallSeconds, s.MessagesPerSec, s.PeakHeapMB = 0, 0, 0
	}
	if reflect.DeepEqual(sa, sc) {
		t.Error("seeds 5 and 6 gave the same run apart from the seed")
	}
}

func TestProgressGoesToStderr(t *testing.T) {
	args := []string{"overlay", "--nodes", "30", "--keys", "3000", "--lookups", "300", "--scans", "30",
		"--leave", "0.1", "--crash", "0.1", "--seed", "3", "--json"} // no --quiet
	code, stdout, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, stderr)
	}
	if !json.Valid([]byte(stdout)) {
		t.Fatalf("stdout of a --json run is not pure JSON:\n%s", stdout)
	}
	var s sim.OverlaySummary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("decoding: %v", err)
	}
	// (Build progress is reported only every 100 joins, so a 30-node run shows none.)
	for _, phase := range []string{"load", "lookups", "scans", "repair"} {
		if !strings.Contains(stderr, phase+":") {
			t.Errorf("no %q progress on stderr:\n%s", phase, stderr)
		}
		if strings.Contains(stdout, phase+":") {
			t.Errorf("%q progress on stdout", phase)
		}
	}

	// The text summary likewise keeps stdout free of progress lines.
	code, stdout, stderr = runCLI(t, args[:len(args)-1]...)
	if code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "load:") {
		t.Errorf("no progress on stderr:\n%s", stderr)
	}
	if strings.Contains(stdout, "load:") || strings.Contains(stdout, "%)") {
		t.Errorf("progress on stdout:\n%s", stdout)
	}
}

// TestProgressDetail: a phase's lines show what the run says of it (a balancing run: the nodes
// over thres) after the time, and a new phase starts without it.
func TestProgressDetail(t *testing.T) {
	var out strings.Builder
	bar := newProgress(&out, false)
	bar.update("balancing", 1, 10)
	bar.setDetail("7 nodes over thres")
	bar.update("balancing", 10, 10) // the last step of a phase always prints
	bar.update("check", 0, 1)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want 3:\n%s", len(lines), out.String())
	}
	if strings.Contains(lines[0], "over thres") || !strings.HasSuffix(lines[1], ", 7 nodes over thres") || strings.Contains(lines[2], "over thres") {
		t.Errorf("progress lines:\n%s", out.String())
	}
}
