package report

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Table is a titled table of preformatted cells with optional notes.
// It renders as Markdown (Markdown) or as CSV (WriteCSV).
type Table struct {
	Title  string     // rendered as a "### " heading; not written to CSV
	Header []string   // column names
	Rows   [][]string // cells; a row may be shorter than Header (padded with empty cells)
	Notes  []string   // plain lines printed below the table; not written to CSV
}

// AddRow appends a row, formatting each cell: strings as-is, integers
// plainly, floats as by Num, fmt.Stringer values (e.g. time.Duration) by
// their String method, nil as an empty cell, anything else with fmt.Sprint.
func (t *Table) AddRow(cells ...any) {
	row := make([]string, len(cells))
	for i, c := range cells {
		row[i] = formatCell(c)
	}
	t.Rows = append(t.Rows, row)
}

func formatCell(c any) string {
	switch v := c.(type) {
	case nil:
		return ""
	case string:
		return v
	case float64:
		return Num(v)
	case float32:
		return Num(float64(v))
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, bool:
		return fmt.Sprint(v)
	case fmt.Stringer:
		return v.String()
	default:
		return fmt.Sprint(v)
	}
}

// Num formats a float for a table cell with about four significant digits
// and no exponent for ordinary magnitudes:
//
//	0 → "0", 0.012345 → "0.01235", 3 → "3", 12.3456 → "12.35",
//	123456.7 → "123457", 1.5e-7 → "1.5e-07", 2e16 → "2e+16".
//
// NaN and infinities render as "NaN", "+Inf" and "-Inf".
func Num(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return strconv.FormatFloat(v, 'g', -1, 64)
	case v == 0:
		return "0"
	case a < 1e-4 || a >= 1e15:
		return strconv.FormatFloat(v, 'g', 3, 64)
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	default:
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
}

// F formats v with exactly digits digits after the decimal point
// (F(2.5, 2) == "2.50"). A negative digits is treated as 0.
func F(v float64, digits int) string {
	return strconv.FormatFloat(v, 'f', max(digits, 0), 64)
}

// MeanSpread renders values as "mean ± stddev" using Num for both numbers,
// where stddev is the sample standard deviation (n−1 denominator). One value
// renders as that value alone; no values render as "-". NaN values propagate
// into the result ("NaN ± NaN") rather than being dropped silently.
func MeanSpread(values []float64) string {
	switch len(values) {
	case 0:
		return "-"
	case 1:
		return Num(values[0])
	}
	mean, sd := meanStd(values)
	return Num(mean) + " ± " + Num(sd)
}

// meanStd returns the mean and the sample standard deviation of values
// (len(values) >= 2).
func meanStd(values []float64) (mean, sd float64) {
	for _, v := range values {
		mean += v
	}
	mean /= float64(len(values))
	var ss float64
	for _, v := range values {
		d := v - mean
		ss += d * d
	}
	return mean, math.Sqrt(ss / float64(len(values)-1))
}

// columns returns the number of columns: the widest of the header and rows.
func (t *Table) columns() int {
	n := len(t.Header)
	for _, r := range t.Rows {
		n = max(n, len(r))
	}
	return n
}

// padded returns row extended with empty cells to n cells.
func padded(row []string, n int) []string {
	out := make([]string, n)
	copy(out, row)
	return out
}

// Markdown writes the table as GitHub-flavoured Markdown with columns padded
// to a common width: the title as a "### " heading, a blank line, the table
// (header, separator, rows), and, if there are notes, a blank line followed
// by one note per line. "|" inside cells is escaped and newlines become
// spaces. A table without a header is an error.
func (t *Table) Markdown(w io.Writer) error {
	if len(t.Header) == 0 {
		return errors.New("report: table has no header")
	}
	n := t.columns()
	lines := make([][]string, 0, len(t.Rows)+1)
	lines = append(lines, padded(t.Header, n))
	for _, r := range t.Rows {
		lines = append(lines, padded(r, n))
	}
	width := make([]int, n)
	for i := range width {
		width[i] = 3 // the separator needs at least "---"
	}
	for _, l := range lines {
		for i, c := range l {
			l[i] = mdCell(c)
			width[i] = max(width[i], utf8.RuneCountInString(l[i]))
		}
	}

	var b strings.Builder
	if t.Title != "" {
		fmt.Fprintf(&b, "### %s\n\n", t.Title)
	}
	writeLine := func(cells []string) {
		b.WriteString("|")
		for i, c := range cells {
			b.WriteString(" ")
			b.WriteString(c)
			b.WriteString(strings.Repeat(" ", width[i]-utf8.RuneCountInString(c)))
			b.WriteString(" |")
		}
		b.WriteString("\n")
	}
	writeLine(lines[0])
	sep := make([]string, n)
	for i := range sep {
		sep[i] = strings.Repeat("-", width[i])
	}
	writeLine(sep)
	for _, l := range lines[1:] {
		writeLine(l)
	}
	if len(t.Notes) > 0 {
		b.WriteString("\n")
		for _, note := range t.Notes {
			b.WriteString(note)
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mdCell makes s safe inside a Markdown table cell.
func mdCell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	s = strings.ReplaceAll(s, "\r\n", " ")
	s = strings.ReplaceAll(s, "\n", " ")
	return s
}

// WriteCSV writes the header and rows to path as CSV (encoding/csv), creating
// the parent directories. Rows are padded with empty cells to a common width
// so that every record has the same number of fields. Title and notes are not
// written.
func (t *Table) WriteCSV(path string) (err error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("report: %w", err)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("report: %w", cerr)
		}
	}()
	n := t.columns()
	cw := csv.NewWriter(f)
	if len(t.Header) > 0 {
		if err := cw.Write(padded(t.Header, n)); err != nil {
			return fmt.Errorf("report: writing %s: %w", path, err)
		}
	}
	for _, r := range t.Rows {
		if err := cw.Write(padded(r, n)); err != nil {
			return fmt.Errorf("report: writing %s: %w", path, err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("report: writing %s: %w", path, err)
	}
	return nil
}
