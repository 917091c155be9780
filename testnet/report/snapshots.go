package report

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Snapshot is the per-node load over the key space at one instant: node i
// owns the keys from KeyStart[i] up to the next node's start and carries
// Load[i].
type Snapshot struct {
	Label    string    // panel title, e.g. "t = 120 s"
	KeyStart []float64 // start key of each node's range (any order; sorted for drawing)
	Load     []float64 // load of each node, same length as KeyStart
	// KeyEnd is the end of the key space, where the last node's range
	// stops. If it is not above the largest KeyStart (e.g. left 0), the
	// last range gets the mean width of the others (width 1 if alone).
	KeyEnd float64
	// Thres, when not empty, is each node's own thres (heterogeneous nodes), drawn as a
	// dashed step line in place of the common thres.
	Thres []float64
}

// LoadSnapshots draws each snapshot as a step line of node load over the
// key space (x = start key of the node's range, y = its load), one panel per
// snapshot stacked top to bottom with shared axis limits, and a dashed
// horizontal line at thres labelled "thres" in the legend (left out if
// thres <= 0). opt.Title heads the figure, opt.XLabel is shown under the
// bottom panel, opt.YLabel on every panel. The figure is 8in wide and
// 2.25in tall per panel (at least 4.5in); it is written to path (.svg or
// .png). Ranges that wrap around the seam of the circle are drawn from
// their start to KeyEnd.
func LoadSnapshots(path string, opt PlotOptions, snaps []Snapshot, thres float64) error {
	if len(snaps) == 0 {
		return errors.New("report: LoadSnapshots: no snapshots")
	}
	if err := opt.validate(); err != nil {
		return err
	}
	if math.IsNaN(thres) || math.IsInf(thres, 0) {
		return fmt.Errorf("report: LoadSnapshots: thres is %v", thres)
	}

	// Build the step lines and the common axis limits.
	steps := make([]plotter.XYs, len(snaps))
	thresSteps := make([]plotter.XYs, len(snaps)) // per-node thresholds, where given
	xmin, xmax := math.Inf(1), math.Inf(-1)
	ymin, ymax := math.Inf(1), math.Inf(-1)
	for i, s := range snaps {
		xys, err := snapshotSteps(s, opt.LogY)
		if err != nil {
			return err
		}
		steps[i] = xys
		if len(s.Thres) > 0 {
			own := s
			own.Load, own.Label = s.Thres, s.Label+" thres"
			if thresSteps[i], err = snapshotSteps(own, opt.LogY); err != nil {
				return err
			}
		}
		for _, line := range []plotter.XYs{xys, thresSteps[i]} {
			for _, pt := range line {
				xmin, xmax = math.Min(xmin, pt.X), math.Max(xmax, pt.X)
				ymin, ymax = math.Min(ymin, pt.Y), math.Max(ymax, pt.Y)
			}
		}
	}
	drawThres := thres > 0
	if drawThres {
		ymin, ymax = math.Min(ymin, thres), math.Max(ymax, thres)
	}
	if !opt.LogY {
		ymin = math.Min(ymin, 0) // loads are read against zero
	}
	if ymax == ymin {
		ymax = ymin + 1
	}

	plots := make([][]*plot.Plot, len(snaps))
	for i, s := range snaps {
		panel := PlotOptions{Title: s.Label, YLabel: opt.YLabel, LogY: opt.LogY}
		if i == len(snaps)-1 {
			panel.XLabel = opt.XLabel
		}
		p := newPlot(panel, true)
		p.Title.TextStyle.Font.Size = vg.Points(11)

		line, err := plotter.NewLine(steps[i])
		if err != nil {
			return fmt.Errorf("report: snapshot %q: %w", s.Label, err)
		}
		line.StepStyle = plotter.PostStep
		line.Color = palette[0]
		line.Width = vg.Points(1.2)
		line.FillColor = color.NRGBA{R: 0x00, G: 0x72, B: 0xB2, A: 0x30}
		p.Add(line)

		var legendPts []plotter.XY
		legendPts = append(legendPts, steps[i]...)
		if drawThres || thresSteps[i] != nil {
			pts := plotter.XYs{{X: xmin, Y: thres}, {X: xmax, Y: thres}}
			if thresSteps[i] != nil {
				pts = thresSteps[i]
			}
			tl, err := plotter.NewLine(pts)
			if err != nil {
				return fmt.Errorf("report: thres line: %w", err)
			}
			if thresSteps[i] != nil {
				tl.StepStyle = plotter.PostStep
			}
			tl.Color = thresColor
			tl.Width = vg.Points(1.2)
			tl.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
			p.Add(tl)
			p.Legend.Add("load", line)
			p.Legend.Add("thres", tl)
		}

		p.X.Min, p.X.Max = xmin, xmax
		p.Y.Min, p.Y.Max = ymin, ymax
		applyYLimits(p, opt)
		placeLegend(p, denser(steps[i]), opt.LogY, allCorners[:2]...)
		plots[i] = []*plot.Plot{p}
	}

	h := max(plotHeight, vg.Length(len(snaps))*panelHeight)
	return saveFigure(path, plotWidth, h, func(dc draw.Canvas) {
		if opt.Title != "" {
			sty := text.Style{
				Color:   color.Black,
				Font:    font.From(plot.DefaultFont, 14),
				XAlign:  draw.XCenter,
				YAlign:  draw.YTop,
				Handler: plot.DefaultTextHandler,
			}
			dc.FillText(sty, vg.Point{X: dc.Center().X, Y: dc.Max.Y - vg.Points(4)}, opt.Title)
			dc.Max.Y -= sty.Rectangle(opt.Title).Size().Y + vg.Points(10)
		}
		tiles := draw.Tiles{
			Rows: len(snaps), Cols: 1,
			PadY:      vg.Points(12),
			PadTop:    vg.Points(4),
			PadBottom: vg.Points(4),
			PadLeft:   vg.Points(4),
			PadRight:  vg.Points(10),
		}
		canvases := plot.Align(plots, tiles, dc)
		for i := range plots {
			plots[i][0].Draw(canvases[i][0])
		}
	})
}

// snapshotSteps checks s and returns its points for a PostStep line: one
// point per node, sorted by start key, plus a final point at the end of the
// last node's range.
func snapshotSteps(s Snapshot, logY bool) (plotter.XYs, error) {
	n := len(s.KeyStart)
	if n != len(s.Load) {
		return nil, fmt.Errorf("report: snapshot %q: %d key starts but %d loads", s.Label, n, len(s.Load))
	}
	if n == 0 {
		return nil, fmt.Errorf("report: snapshot %q has no nodes", s.Label)
	}
	if err := checkValues(fmt.Sprintf("snapshot %q: KeyStart", s.Label), s.KeyStart, false); err != nil {
		return nil, err
	}
	if err := checkValues(fmt.Sprintf("snapshot %q: Load", s.Label), s.Load, logY); err != nil {
		return nil, err
	}
	if math.IsNaN(s.KeyEnd) || math.IsInf(s.KeyEnd, 0) {
		return nil, fmt.Errorf("report: snapshot %q: KeyEnd is %v", s.Label, s.KeyEnd)
	}
	xys := make(plotter.XYs, n, n+1)
	for i := range xys {
		xys[i] = plotter.XY{X: s.KeyStart[i], Y: s.Load[i]}
	}
	sort.SliceStable(xys, func(a, b int) bool { return xys[a].X < xys[b].X })
	first, last := xys[0].X, xys[n-1].X
	end := s.KeyEnd
	if end <= last {
		end = last + 1
		if n > 1 && last > first {
			end = last + (last-first)/float64(n-1)
		}
	}
	return append(xys, plotter.XY{X: end, Y: xys[n-1].Y}), nil
}

// denser returns the points of a PostStep line with the middle of each
// step added, so that long flat steps count when placing the legend.
func denser(xys plotter.XYs) []plotter.XY {
	out := make([]plotter.XY, 0, 2*len(xys))
	for i, pt := range xys {
		out = append(out, pt)
		if i+1 < len(xys) {
			out = append(out, plotter.XY{X: (pt.X + xys[i+1].X) / 2, Y: pt.Y})
		}
	}
	return out
}
