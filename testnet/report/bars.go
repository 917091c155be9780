package report

import (
	"errors"
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// BarSeries is one coloured bar per group, e.g. one algorithm across
// workloads.
type BarSeries struct {
	Name   string    // legend entry
	Values []float64 // bar heights, one per group
	Errors []float64 // optional error-bar half-lengths (e.g. stddev), one per group; nil for none
}

// BarChart draws grouped bars, one group per entry of groups (labelled on
// the X axis) and within each group one bar per series, with optional
// error bars, a grid and a legend, in an 8in × 4.5in figure written to path
// (.svg or .png). Bars start at zero, so opt.LogY is rejected.
func BarChart(path string, opt PlotOptions, groups []string, bars []BarSeries) error {
	if len(groups) == 0 {
		return errors.New("report: BarChart: no groups")
	}
	if len(bars) == 0 {
		return errors.New("report: BarChart: no bar series")
	}
	if opt.LogY {
		return errors.New("report: BarChart: a log-scale Y axis is not supported (bars start at zero)")
	}
	if err := opt.validate(); err != nil {
		return err
	}
	p := newPlot(opt, false)
	width := 0.8 / float64(len(bars)) // data units; a group spans 1
	var tops []plotter.XY
	for j, b := range bars {
		if len(b.Values) != len(groups) {
			return fmt.Errorf("report: bar series %q: %d values for %d groups", b.Name, len(b.Values), len(groups))
		}
		if err := checkValues(fmt.Sprintf("bar series %q: Values", b.Name), b.Values, false); err != nil {
			return err
		}
		if b.Errors != nil {
			if len(b.Errors) != len(groups) {
				return fmt.Errorf("report: bar series %q: %d errors for %d groups", b.Name, len(b.Errors), len(groups))
			}
			if err := checkValues(fmt.Sprintf("bar series %q: Errors", b.Name), b.Errors, false); err != nil {
				return err
			}
			for i, e := range b.Errors {
				if e < 0 {
					return fmt.Errorf("report: bar series %q: Errors[%d] = %v is negative", b.Name, i, e)
				}
			}
		}
		off := (float64(j) - float64(len(bars)-1)/2) * width
		bp := &barPlotter{width: width * 0.9, color: seriesColor(j)}
		for i, v := range b.Values {
			bp.xys = append(bp.xys, plotter.XY{X: float64(i) + off, Y: v})
		}
		p.Add(bp)
		if b.Name != "" {
			p.Legend.Add(b.Name, bp)
		}
		tops = append(tops, bp.xys...)
		if b.Errors != nil {
			eb, err := plotter.NewYErrorBars(errorBars{xys: bp.xys, errs: b.Errors})
			if err != nil {
				return fmt.Errorf("report: bar series %q: %w", b.Name, err)
			}
			eb.CapWidth = vg.Points(4)
			p.Add(eb)
			for i, pt := range bp.xys {
				tops = append(tops, plotter.XY{X: pt.X, Y: pt.Y + b.Errors[i]})
			}
		}
	}
	p.NominalX(groups...)
	p.X.Min, p.X.Max = -0.5, float64(len(groups))-0.5
	if opt.YMax == nil && p.Y.Max > p.Y.Min {
		p.Y.Max += 0.15 * (p.Y.Max - p.Y.Min) // headroom for the legend
	}
	applyYLimits(p, opt)
	placeLegend(p, tops, false, allCorners[:2]...)
	return saveFigure(path, plotWidth, plotHeight, func(dc draw.Canvas) { p.Draw(dc) })
}

// barPlotter draws bars from zero to Y centred at X, width data units wide
// (plotter.BarChart measures widths in points, which cannot be aligned
// with error bars placed in data units).
type barPlotter struct {
	xys   plotter.XYs
	width float64
	color color.Color
}

var outline = draw.LineStyle{Color: color.Black, Width: vg.Points(0.5)}

// Plot implements plot.Plotter.
func (b *barPlotter) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	base := math.Min(math.Max(0, p.Y.Min), p.Y.Max) // zero, or the axis end nearest to it
	for _, pt := range b.xys {
		x0, x1 := trX(pt.X-b.width/2), trX(pt.X+b.width/2)
		y0, y1 := trY(base), trY(pt.Y)
		rect := []vg.Point{{X: x0, Y: y0}, {X: x0, Y: y1}, {X: x1, Y: y1}, {X: x1, Y: y0}}
		if poly := c.ClipPolygonXY(rect); len(poly) > 0 {
			c.FillPolygon(b.color, poly)
		}
		c.StrokeLines(outline, c.ClipLinesXY(append(rect, rect[0]))...)
	}
}

// DataRange implements plot.DataRanger; the Y range includes zero.
func (b *barPlotter) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax, ymin, ymax = math.Inf(1), math.Inf(-1), 0, 0
	for _, pt := range b.xys {
		xmin, xmax = math.Min(xmin, pt.X-b.width/2), math.Max(xmax, pt.X+b.width/2)
		ymin, ymax = math.Min(ymin, pt.Y), math.Max(ymax, pt.Y)
	}
	return xmin, xmax, ymin, ymax
}

// Thumbnail implements plot.Thumbnailer for the legend.
func (b *barPlotter) Thumbnail(c *draw.Canvas) {
	rect := []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Min.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Min.Y}}
	c.FillPolygon(b.color, c.ClipPolygonY(rect))
	c.StrokeLines(outline, c.ClipLinesY(append(rect, rect[0]))...)
}

// errorBars adapts bar positions and symmetric errors to plotter.YErrorBars.
type errorBars struct {
	xys  plotter.XYs
	errs []float64
}

func (e errorBars) Len() int                        { return len(e.xys) }
func (e errorBars) XY(i int) (float64, float64)     { return e.xys[i].X, e.xys[i].Y }
func (e errorBars) YError(i int) (float64, float64) { return e.errs[i], e.errs[i] }
