package report

import (
	"errors"
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Series is one named curve: Y[i] at X[i].
type Series struct {
	Name string // legend entry; empty leaves the series out of the legend
	X, Y []float64
}

// LinePlot draws the series as lines in one 8in × 4.5in figure (for
// example a metric over time, one series per algorithm) with a grid and a
// legend placed in the emptiest corner, and writes it to path (.svg or
// .png). A series with a single point is drawn as a dot.
func LinePlot(path string, opt PlotOptions, series ...Series) error {
	if len(series) == 0 {
		return errors.New("report: LinePlot: no series")
	}
	if err := opt.validate(); err != nil {
		return err
	}
	p := newPlot(opt, true)
	var all []plotter.XY
	for i, s := range series {
		if len(s.X) != len(s.Y) {
			return fmt.Errorf("report: series %q: %d X values but %d Y values", s.Name, len(s.X), len(s.Y))
		}
		if len(s.X) == 0 {
			return fmt.Errorf("report: series %q is empty", s.Name)
		}
		if err := checkValues(fmt.Sprintf("series %q: X", s.Name), s.X, false); err != nil {
			return err
		}
		if err := checkValues(fmt.Sprintf("series %q: Y", s.Name), s.Y, opt.LogY); err != nil {
			return err
		}
		xys := make(plotter.XYs, len(s.X))
		for k := range xys {
			xys[k] = plotter.XY{X: s.X[k], Y: s.Y[k]}
		}
		all = append(all, xys...)

		line, err := plotter.NewLine(xys)
		if err != nil {
			return fmt.Errorf("report: series %q: %w", s.Name, err)
		}
		line.Color = seriesColor(i)
		line.Width = vg.Points(1.5)
		line.Dashes = seriesDashes(i)
		p.Add(line)
		thumbs := []plot.Thumbnailer{line}
		if len(xys) == 1 {
			dot, err := plotter.NewScatter(xys)
			if err != nil {
				return fmt.Errorf("report: series %q: %w", s.Name, err)
			}
			dot.Color = seriesColor(i)
			dot.Shape = draw.CircleGlyph{}
			dot.Radius = vg.Points(3)
			p.Add(dot)
			thumbs = append(thumbs, dot)
		}
		if s.Name != "" {
			p.Legend.Add(s.Name, thumbs...)
		}
	}
	applyYLimits(p, opt)
	placeLegend(p, all, opt.LogY, allCorners...)
	return saveFigure(path, plotWidth, plotHeight, func(dc draw.Canvas) { p.Draw(dc) })
}
