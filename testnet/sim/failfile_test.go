package sim

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// keptProperties names the property behind each directory of kept fail files
// (testdata/rapid/<test>/<test>-known-*.fail).
var keptProperties = map[string]func(*rapid.T){
	"TestOverlayProperties":      overlayProperty,
	"TestPartitionProperties":    partitionProperty,
	"TestPauseProperties":        pauseProperty,
	"TestBalanceProperties":      balanceProperty(faultNone),
	"TestBalanceCrashProperties": balanceProperty(faultCrash),
	"TestBalancePauseProperties": balanceProperty(faultPause),
	"TestBalanceCutProperties":   balanceProperty(faultCut),
}

// TestKeptFailFilesReplayTheirCases replays every kept fail file and checks that it still draws
// what it drew when it failed, as the file's comments recorded. rapid replays these files before
// each run of their test, but a file is only a list of raw draws: once a generator draws
// differently before the point where the case failed (a draw added, removed or re-ranged), the
// file plays some other case and passes, guarding nothing — and rapid cannot tell, logging
// "no longer valid" alike for that and for a fixed case's replay that ran past its failure and
// out of draws. This test tells them apart. When it fails, either repair the file (insert or drop
// the raw values the changed draw reads, until the draws match again) or turn the case into a
// unit test and delete the file.
func TestKeptFailFilesReplayTheirCases(t *testing.T) {
	files, err := filepath.Glob("testdata/rapid/*/*.fail")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no kept fail files under testdata/rapid")
	}
	for _, file := range files {
		test := filepath.Base(filepath.Dir(file))
		t.Run(strings.TrimSuffix(filepath.Base(file), ".fail"), func(t *testing.T) {
			prop := keptProperties[test]
			if prop == nil {
				t.Fatalf("%s: no property named for %s in keptProperties", file, test)
			}
			recorded := recordedDraws(t, file)
			if len(recorded) == 0 {
				t.Fatalf("%s records no draws", file)
			}
			replayed := replayDraws(t, file, prop)
			for i, want := range recorded {
				if i >= len(replayed) {
					t.Fatalf("%s: the replay stopped after %d of the %d recorded draws", file, len(replayed), len(recorded))
				}
				if replayed[i] != want {
					t.Fatalf("%s plays another case now: draw %d is %q, recorded %q", file, i+1, replayed[i], want)
				}
			}
		})
	}
}

// drawLine matches rapid's verbose log of one draw, "[rapid] draw <label>: <value>".
var drawLine = regexp.MustCompile(`\[rapid\] draw (.*)$`)

// recordedDraws reads the draws a fail file's comments logged when rapid saved it.
func recordedDraws(t *testing.T, file string) []string {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var draws []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "#") {
			if m := drawLine.FindStringSubmatch(line); m != nil {
				draws = append(draws, m[1])
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return draws
}

// replayDraws replays file alone through prop, with rapid's verbose output on, and returns the
// draws the replay made. A failure of the replay itself (the case's bug back) fails t.
func replayDraws(t *testing.T, file string, prop func(*rapid.T)) []string {
	for name, value := range map[string]string{
		"rapid.failfile":   file,
		"rapid.v":          "true",
		"rapid.checks":     "0", // the file only, no random cases after it
		"rapid.nofailfile": "true",
	} {
		f := flag.Lookup(name)
		if f == nil {
			t.Fatalf("rapid's flag -%s is not defined", name)
		}
		old := f.Value.String()
		if err := f.Value.Set(value); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = f.Value.Set(old) }()
	}
	rec := &drawRecorder{T: t}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(strings.Join(rec.lines, "\n"))
		}
	})
	rapid.Check(rec, prop)
	return rec.draws
}

// drawRecorder is the testing.T a replay reports to: it keeps the draws rapid logs, and its
// other lines to show only if the replay fails; everything else goes to T.
type drawRecorder struct {
	*testing.T
	draws []string
	lines []string
}

func (r *drawRecorder) Logf(format string, args ...any) {
	r.Log(fmt.Sprintf(format, args...))
}

func (r *drawRecorder) Log(args ...any) {
	line := fmt.Sprint(args...)
	r.lines = append(r.lines, line)
	if m := drawLine.FindStringSubmatch(line); m != nil {
		r.draws = append(r.draws, m[1])
	}
}
