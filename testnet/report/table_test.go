package report

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestMarkdown(t *testing.T) {
	tb := Table{
		Title:  "Gini after balancing",
		Header: []string{"algorithm", "nodes", "gini"},
		Notes:  []string{"3 runs per cell.", "lower is better"},
	}
	tb.AddRow("NIXMIG", 500, 0.123456)
	tb.AddRow("none|raw", int64(1000), MeanSpread([]float64{1, 2, 3}))
	tb.AddRow("short") // padded with empty cells
	var b strings.Builder
	if err := tb.Markdown(&b); err != nil {
		t.Fatal(err)
	}
	// Column widths: "none\|raw" is 9 runes, "2 ± 1" is 5, "0.1235" is 6.
	want := "### Gini after balancing\n" +
		"\n" +
		"| algorithm | nodes | gini   |\n" +
		"| --------- | ----- | ------ |\n" +
		"| NIXMIG    | 500   | 0.1235 |\n" +
		"| none\\|raw | 1000  | 2 ± 1  |\n" +
		"| short     |       |        |\n" +
		"\n" +
		"3 runs per cell.\n" +
		"lower is better\n"
	if got := b.String(); got != want {
		t.Errorf("Markdown:\n got:\n%s\nwant:\n%s", got, want)
	}
}

func TestMarkdownNoTitleNoNotes(t *testing.T) {
	tb := Table{Header: []string{"a"}}
	tb.AddRow(1.5)
	var b strings.Builder
	if err := tb.Markdown(&b); err != nil {
		t.Fatal(err)
	}
	want := "| a   |\n| --- |\n| 1.5 |\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

func TestMarkdownNoHeader(t *testing.T) {
	var tb Table
	tb.AddRow(1)
	if err := tb.Markdown(&strings.Builder{}); err == nil {
		t.Error("Markdown of a table without header: no error")
	}
}

func TestAddRowFormatting(t *testing.T) {
	var tb Table
	tb.AddRow("s", 7, uint8(3), float32(0.5), 2.0, 1234.56, 1.5e-7, true, 1500*time.Millisecond, nil, []int{1})
	want := []string{"s", "7", "3", "0.5", "2", "1235", "1.5e-07", "true", "1.5s", "", "[1]"}
	if !reflect.DeepEqual(tb.Rows[0], want) {
		t.Errorf("AddRow: got %q, want %q", tb.Rows[0], want)
	}
}

func TestNumbers(t *testing.T) {
	cases := []struct {
		got, want string
	}{
		{Num(0), "0"},
		{Num(0.012345), "0.01235"},
		{Num(12.3456), "12.35"},
		{Num(-3), "-3"},
		{Num(123456.7), "123457"},
		{Num(2e16), "2e+16"},
		{F(2.5, 2), "2.50"},
		{F(2.5, -1), "2"},
		{MeanSpread(nil), "-"},
		{MeanSpread([]float64{4.25}), "4.25"},
		{MeanSpread([]float64{1, 3}), "2 ± 1.414"},
	}
	for i, c := range cases {
		if c.got != c.want {
			t.Errorf("case %d: got %q, want %q", i, c.got, c.want)
		}
	}
}

func TestWriteCSVRoundTrip(t *testing.T) {
	tb := Table{Title: "ignored", Header: []string{"name", "value"}, Notes: []string{"ignored"}}
	tb.AddRow("plain", 1)
	tb.AddRow(`with "quotes", commas`, 2.5)
	tb.AddRow("multi\nline", MeanSpread([]float64{1, 2}))
	tb.AddRow("short")
	path := filepath.Join(t.TempDir(), "sub", "dir", "t.csv")
	if err := tb.WriteCSV(path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"name", "value"},
		{"plain", "1"},
		{`with "quotes", commas`, "2.5"},
		{"multi\nline", "1.5 ± 0.7071"},
		{"short", ""},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("CSV round trip:\n got %q\nwant %q", got, want)
	}
}

func TestWriteCSVBadPath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tb := Table{Header: []string{"a"}}
	if err := tb.WriteCSV(filepath.Join(file, "x.csv")); err == nil {
		t.Error("WriteCSV under a regular file: no error")
	}
}
