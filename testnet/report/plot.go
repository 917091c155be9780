package report

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// PlotOptions are the settings shared by the plot functions.
type PlotOptions struct {
	Title  string // figure title
	XLabel string // X-axis label
	YLabel string // Y-axis label
	// LogY draws the Y axis on a logarithmic scale; every plotted Y value
	// (and YMin, if set) must then be > 0.
	LogY bool
	// YMin and YMax fix the Y-axis limits; nil fits the axis to the data.
	YMin, YMax *float64
}

// Figure sizes: a single plot is 8in × 4.5in; LoadSnapshots stacks panels
// of panelHeight each (at least plotHeight in total).
const (
	plotWidth   = 8 * vg.Inch
	plotHeight  = 4.5 * vg.Inch
	panelHeight = 2.25 * vg.Inch
)

// palette is the Okabe–Ito colour-blind-safe palette (yellow left out: it
// does not read on white), in the order series are coloured.
var palette = []color.Color{
	color.RGBA{R: 0x00, G: 0x72, B: 0xB2, A: 0xFF}, // blue
	color.RGBA{R: 0xD5, G: 0x5E, B: 0x00, A: 0xFF}, // vermillion
	color.RGBA{R: 0x00, G: 0x9E, B: 0x73, A: 0xFF}, // bluish green
	color.RGBA{R: 0xCC, G: 0x79, B: 0xA7, A: 0xFF}, // reddish purple
	color.RGBA{R: 0xE6, G: 0x9F, B: 0x00, A: 0xFF}, // orange
	color.RGBA{R: 0x56, G: 0xB4, B: 0xE9, A: 0xFF}, // sky blue
	color.RGBA{R: 0x00, G: 0x00, B: 0x00, A: 0xFF}, // black
}

// seriesColor is the colour of the i-th series.
func seriesColor(i int) color.Color { return palette[i%len(palette)] }

// seriesDashes is the dash pattern of the i-th series: solid for the first
// len(palette) series, then a different pattern each time the colours repeat.
func seriesDashes(i int) []vg.Length {
	patterns := [][]vg.Length{
		nil,
		{vg.Points(6), vg.Points(3)},
		{vg.Points(2), vg.Points(2)},
		{vg.Points(6), vg.Points(2), vg.Points(2), vg.Points(2)},
	}
	return patterns[(i/len(palette))%len(patterns)]
}

// thresColor is the colour of threshold lines.
var thresColor = color.RGBA{R: 0xC0, G: 0x00, B: 0x00, A: 0xFF}

// validate checks the options that do not depend on the data.
func (opt PlotOptions) validate() error {
	for _, l := range []struct {
		name string
		v    *float64
	}{{"YMin", opt.YMin}, {"YMax", opt.YMax}} {
		if l.v == nil {
			continue
		}
		if math.IsNaN(*l.v) || math.IsInf(*l.v, 0) {
			return fmt.Errorf("report: PlotOptions.%s is %v", l.name, *l.v)
		}
		if opt.LogY && *l.v <= 0 {
			return fmt.Errorf("report: PlotOptions.%s = %v is not positive, which a log-scale Y axis cannot show", l.name, *l.v)
		}
	}
	if opt.YMin != nil && opt.YMax != nil && *opt.YMin >= *opt.YMax {
		return fmt.Errorf("report: PlotOptions.YMin (%v) is not below YMax (%v)", *opt.YMin, *opt.YMax)
	}
	return nil
}

// checkValues reports the first NaN or infinite value of vs, or, if
// positive is set, the first value that is not > 0. what names vs in the
// message.
func checkValues(what string, vs []float64, positive bool) error {
	for i, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("report: %s[%d] is %v", what, i, v)
		}
		if positive && v <= 0 {
			return fmt.Errorf("report: %s[%d] = %v is not positive, which a log-scale Y axis cannot show", what, i, v)
		}
	}
	return nil
}

// newPlot returns a plot with the title, axis labels, grid and Y scale of
// opt; vertical grid lines are drawn only if vgrid is set.
func newPlot(opt PlotOptions, vgrid bool) *plot.Plot {
	p := plot.New()
	p.Title.Text = opt.Title
	p.Title.Padding = vg.Points(6)
	p.X.Label.Text = opt.XLabel
	p.Y.Label.Text = opt.YLabel
	grid := plotter.NewGrid()
	grid.Vertical.Color = color.Gray{Y: 0xD0}
	grid.Horizontal.Color = color.Gray{Y: 0xD0}
	grid.Vertical.Width = vg.Points(0.5)
	grid.Horizontal.Width = vg.Points(0.5)
	if !vgrid {
		grid.Vertical.Color = nil
	}
	p.Add(grid)
	if opt.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	return p
}

// applyYLimits sets the Y-axis limits fixed by opt; call it after adding
// the data, which widens the axis.
func applyYLimits(p *plot.Plot, opt PlotOptions) {
	if opt.YMin != nil {
		p.Y.Min = *opt.YMin
	}
	if opt.YMax != nil {
		p.Y.Max = *opt.YMax
	}
}

// legendCorner is a corner of the data area the legend can go to.
type legendCorner struct{ top, left bool }

// placeLegend puts the legend into the corner, among candidates (in order
// of preference), whose region (40% of the width, 30% of the height) holds
// the fewest of pts. Call it once the axis limits are final.
func placeLegend(p *plot.Plot, pts []plotter.XY, logY bool, candidates ...legendCorner) {
	xmin, xmax, ymin, ymax := p.X.Min, p.X.Max, p.Y.Min, p.Y.Max
	if logY {
		ymin, ymax = math.Log(ymin), math.Log(ymax)
	}
	best, bestN := candidates[0], math.MaxInt
	for _, c := range candidates {
		n := 0
		for _, pt := range pts {
			y := pt.Y
			if logY {
				y = math.Log(y)
			}
			fx, fy := 0.5, 0.5
			if xmax > xmin {
				fx = (pt.X - xmin) / (xmax - xmin)
			}
			if ymax > ymin {
				fy = (y - ymin) / (ymax - ymin)
			}
			inX := (c.left && fx <= 0.4) || (!c.left && fx >= 0.6)
			inY := (c.top && fy >= 0.7) || (!c.top && fy <= 0.3)
			if inX && inY {
				n++
			}
		}
		if n < bestN {
			best, bestN = c, n
		}
	}
	p.Legend.Top, p.Legend.Left = best.top, best.left
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(-6), vg.Points(-4)
	if best.left {
		p.Legend.XOffs = vg.Points(6)
	}
	if !best.top {
		p.Legend.YOffs = vg.Points(4)
	}
}

// allCorners is the order of preference of legend corners.
var allCorners = []legendCorner{{true, false}, {true, true}, {false, false}, {false, true}}

// saveFigure creates a w×h canvas in the format named by path's extension
// (".svg", ".png", or any other gonum supports), paints it white, lets fn
// draw on it and writes it to path, creating the parent directories.
// A panic while drawing is returned as an error.
func saveFigure(path string, w, h vg.Length, fn func(dc draw.Canvas)) (err error) {
	ext := strings.ToLower(filepath.Ext(path))
	if ext == "" {
		return fmt.Errorf("report: %s: no file extension to choose the image format (want .svg or .png)", path)
	}
	c, err := draw.NewFormattedCanvas(w, h, ext[1:])
	if err != nil {
		return fmt.Errorf("report: %s: %w", path, err)
	}
	if err := drawSafely(c, fn); err != nil {
		return fmt.Errorf("report: drawing %s: %w", path, err)
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("report: %w", err)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("report: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("report: writing %s: %w", path, err)
	}
	return nil
}

// drawSafely paints c white and runs fn on it, turning a panic into an
// error (gonum panics on some inputs the checks here should already catch).
func drawSafely(c vg.CanvasSizer, fn func(dc draw.Canvas)) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	dc := draw.New(c)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	fn(dc)
	return nil
}
