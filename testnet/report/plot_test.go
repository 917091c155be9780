package report

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkSVG fails the test unless path holds a well-formed SVG document that
// contains every one of texts.
func checkSVG(t *testing.T, path string, texts ...string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) == 0 {
		t.Fatalf("%s is empty", path)
	}
	if !bytes.HasPrefix(data, []byte("<?xml")) && !bytes.HasPrefix(data, []byte("<svg")) {
		t.Fatalf("%s does not start like an SVG document: %.40q", path, data)
	}
	dec := xml.NewDecoder(bytes.NewReader(data))
	sawSVG := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed XML: %v", path, err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "svg" {
			sawSVG = true
		}
	}
	if !sawSVG {
		t.Fatalf("%s has no <svg> element", path)
	}
	for _, s := range texts {
		if !strings.Contains(string(data), s) {
			t.Errorf("%s does not contain %q", path, s)
		}
	}
}

func ptr(v float64) *float64 { return &v }

func TestLinePlot(t *testing.T) {
	x := []float64{0, 1, 2, 3, 4}
	path := filepath.Join(t.TempDir(), "plots", "gini.svg")
	opt := PlotOptions{Title: "Gini over time", XLabel: "time (s)", YLabel: "Gini"}
	err := LinePlot(path, opt,
		Series{Name: "NIXMIG", X: x, Y: []float64{0.8, 0.5, 0.3, 0.2, 0.15}},
		Series{Name: "none", X: x, Y: []float64{0.8, 0.8, 0.79, 0.8, 0.81}},
		Series{Name: "single", X: []float64{2}, Y: []float64{0.4}},
	)
	if err != nil {
		t.Fatal(err)
	}
	checkSVG(t, path, "Gini over time", "time (s)", "NIXMIG", "none")
}

func TestLinePlotLogYAndLimits(t *testing.T) {
	dir := t.TempDir()
	s := Series{Name: "msgs", X: []float64{1, 2, 3}, Y: []float64{10, 1000, 1e5}}
	path := filepath.Join(dir, "log.svg")
	if err := LinePlot(path, PlotOptions{Title: "Messages", LogY: true}, s); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, path, "Messages")
	path = filepath.Join(dir, "limits.svg")
	if err := LinePlot(path, PlotOptions{Title: "Clamped", YMin: ptr(0), YMax: ptr(500)}, s); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, path, "Clamped")
}

func TestLinePlotPNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gini.png")
	if err := LinePlot(path, PlotOptions{Title: "png"}, Series{Name: "a", X: []float64{0, 1}, Y: []float64{1, 2}}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("%s is not a PNG file", path)
	}
}

func TestLoadSnapshots(t *testing.T) {
	snaps := []Snapshot{
		{Label: "t = 0 s", KeyStart: []float64{0, 0.25, 0.5, 0.75}, Load: []float64{10, 80, 20, 5}, KeyEnd: 1},
		// Unsorted starts, no KeyEnd: sorted and the last range extended.
		{Label: "t = 60 s", KeyStart: []float64{0.6, 0, 0.3}, Load: []float64{30, 30, 40}},
		{Label: "t = 120 s", KeyStart: []float64{0.2}, Load: []float64{35}},
	}
	path := filepath.Join(t.TempDir(), "snaps.svg")
	opt := PlotOptions{Title: "Load over the key space", XLabel: "key", YLabel: "load"}
	if err := LoadSnapshots(path, opt, snaps, 50); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, path, "Load over the key space", "t = 60 s", "thres", "key")

	// No threshold line, single panel, log scale.
	path = filepath.Join(t.TempDir(), "snap.svg")
	if err := LoadSnapshots(path, PlotOptions{Title: "one", LogY: true}, snaps[:1], 0); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, path, "one")

	// Each node its own thres (heterogeneous nodes): a step line, drawn without a common thres.
	own := snaps[0]
	own.Thres = []float64{30, 60, 90, 30}
	path = filepath.Join(t.TempDir(), "own.svg")
	if err := LoadSnapshots(path, PlotOptions{Title: "own"}, []Snapshot{own}, 0); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, path, "own", "thres")
	own.Thres = []float64{30}
	if err := LoadSnapshots(path, PlotOptions{Title: "own"}, []Snapshot{own}, 0); err == nil {
		t.Fatal("one thres for four nodes was drawn")
	}
}

func TestBarChart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bars.svg")
	opt := PlotOptions{Title: "Messages per workload", YLabel: "messages"}
	groups := []string{"uniform", "zipf", "hotspot"}
	bars := []BarSeries{
		{Name: "NIXMIG", Values: []float64{10, 20, 30}, Errors: []float64{1, 2, 3}},
		{Name: "baseline", Values: []float64{12, 25, 40}},
	}
	if err := BarChart(path, opt, groups, bars); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, path, "Messages per workload", "hotspot", "baseline")

	// Negative values and a single bar series.
	path = filepath.Join(t.TempDir(), "neg.svg")
	if err := BarChart(path, PlotOptions{Title: "delta"}, groups[:2], []BarSeries{{Name: "d", Values: []float64{-1, 2}}}); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, path, "delta")
}

func TestPlotErrors(t *testing.T) {
	dir := t.TempDir()
	svg := filepath.Join(dir, "x.svg")
	nan := math.NaN()
	ok := Series{Name: "ok", X: []float64{0, 1}, Y: []float64{1, 2}}
	snap := Snapshot{Label: "s", KeyStart: []float64{0, 0.5}, Load: []float64{1, 2}}
	groups := []string{"a", "b"}
	bar := BarSeries{Name: "b", Values: []float64{1, 2}}
	cases := []struct {
		name string
		err  error
	}{
		{"line: no series", LinePlot(svg, PlotOptions{})},
		{"line: length mismatch", LinePlot(svg, PlotOptions{}, Series{Name: "m", X: []float64{0, 1}, Y: []float64{1}})},
		{"line: empty series", LinePlot(svg, PlotOptions{}, Series{Name: "e"})},
		{"line: NaN", LinePlot(svg, PlotOptions{}, Series{Name: "n", X: []float64{0, 1}, Y: []float64{1, nan}})},
		{"line: Inf", LinePlot(svg, PlotOptions{}, Series{Name: "i", X: []float64{math.Inf(1), 1}, Y: []float64{1, 2}})},
		{"line: log of zero", LinePlot(svg, PlotOptions{LogY: true}, Series{Name: "z", X: []float64{0, 1}, Y: []float64{0, 1}})},
		{"line: YMin >= YMax", LinePlot(svg, PlotOptions{YMin: ptr(2), YMax: ptr(1)}, ok)},
		{"line: NaN YMax", LinePlot(svg, PlotOptions{YMax: ptr(nan)}, ok)},
		{"line: no extension", LinePlot(filepath.Join(dir, "noext"), PlotOptions{}, ok)},
		{"line: unknown format", LinePlot(filepath.Join(dir, "x.bogus"), PlotOptions{}, ok)},
		{"snaps: none", LoadSnapshots(svg, PlotOptions{}, nil, 1)},
		{"snaps: NaN thres", LoadSnapshots(svg, PlotOptions{}, []Snapshot{snap}, nan)},
		{"snaps: length mismatch", LoadSnapshots(svg, PlotOptions{}, []Snapshot{{Label: "m", KeyStart: []float64{0}, Load: []float64{1, 2}}}, 1)},
		{"snaps: no nodes", LoadSnapshots(svg, PlotOptions{}, []Snapshot{{Label: "e"}}, 1)},
		{"snaps: NaN load", LoadSnapshots(svg, PlotOptions{}, []Snapshot{{Label: "n", KeyStart: []float64{0}, Load: []float64{nan}}}, 1)},
		{"snaps: log of zero", LoadSnapshots(svg, PlotOptions{LogY: true}, []Snapshot{{Label: "z", KeyStart: []float64{0}, Load: []float64{0}}}, 1)},
		{"bars: no groups", BarChart(svg, PlotOptions{}, nil, []BarSeries{bar})},
		{"bars: no series", BarChart(svg, PlotOptions{}, groups, nil)},
		{"bars: length mismatch", BarChart(svg, PlotOptions{}, groups, []BarSeries{{Name: "m", Values: []float64{1}}})},
		{"bars: errors mismatch", BarChart(svg, PlotOptions{}, groups, []BarSeries{{Name: "m", Values: []float64{1, 2}, Errors: []float64{1}}})},
		{"bars: negative error", BarChart(svg, PlotOptions{}, groups, []BarSeries{{Name: "m", Values: []float64{1, 2}, Errors: []float64{1, -1}}})},
		{"bars: NaN", BarChart(svg, PlotOptions{}, groups, []BarSeries{{Name: "m", Values: []float64{1, nan}}})},
		{"bars: log", BarChart(svg, PlotOptions{LogY: true}, groups, []BarSeries{bar})},
	}
	for _, c := range cases {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
		} else if !strings.HasPrefix(c.err.Error(), "report: ") {
			t.Errorf("%s: error %q lacks the package prefix", c.name, c.err)
		}
	}
	if _, err := os.Stat(svg); err == nil {
		t.Errorf("a failed plot left %s behind", svg)
	}
}

func TestRingMap(t *testing.T) {
	dir := t.TempDir()
	// A lump of 150 moving one node a record over nodes of 50, one node with room.
	var recs []RingRecord
	for step := range 5 {
		loads := make([]float64, 20)
		for i := range loads {
			loads[i] = 50
		}
		loads[3+step], loads[15] = 150, 20
		recs = append(recs, RingRecord{T: 100 + 10*float64(step), Load: loads})
	}
	path := filepath.Join(dir, "ring.svg")
	if err := RingMap(path, PlotOptions{Title: "lump", XLabel: "node", YLabel: "t"}, recs, 60, 0.7); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, path, "lump", "under 70% of thres", "at or over thres")
	// Each node's own thres: loads of 50 are over a thres of 40 and under 70% of one of 100.
	mixed := []RingRecord{{T: 1, Load: []float64{50, 50}, Thres: []float64{40, 100}}}
	if err := RingMap(filepath.Join(dir, "mixed.svg"), PlotOptions{Title: "mixed"}, mixed, 60, 0.7); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, filepath.Join(dir, "mixed.svg"), "under 70% of thres", "at or over thres")

	bad := []struct {
		name      string
		recs      []RingRecord
		thres, rs float64
	}{
		{"no records", nil, 60, 0.7},
		{"NaN load", []RingRecord{{T: 1, Load: []float64{math.NaN()}}}, 60, 0.7},
		{"infinite time", []RingRecord{{T: math.Inf(1), Load: []float64{1}}}, 60, 0.7},
		{"zero thres", recs, 0, 0.7},
		{"room share 1", recs, 60, 1},
		{"thresholds not one a node", []RingRecord{{T: 1, Load: []float64{1, 2}, Thres: []float64{60}}}, 60, 0.7},
		{"zero node thres", []RingRecord{{T: 1, Load: []float64{1}, Thres: []float64{0}}}, 60, 0.7},
	}
	for _, c := range bad {
		if err := RingMap(filepath.Join(dir, "bad.svg"), PlotOptions{}, c.recs, c.thres, c.rs); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}
