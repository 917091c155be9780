package report

import (
	"errors"
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// RingRecord is every node's load at one instant, in ring order (node i is the i-th from the
// smallest start), and each node's thres when the nodes have their own (empty: RingMap's).
type RingRecord struct {
	T     float64
	Load  []float64
	Thres []float64
}

// RingMap draws where the loaded and the light nodes are over time: x is a node's index in ring
// order, y the instant; a node at or over its thres (the record's, else thres) is a vermillion
// dot whose area grows with its load against that thres, one under roomShare·thres a small blue
// dot, the others are left out. A lump of load that
// travels from node to node draws a slanted track; nodes with room for it draw columns of dots.
// The figure is 8in × 6in, written to path (.svg or .png).
func RingMap(path string, opt PlotOptions, records []RingRecord, thres, roomShare float64) error {
	if len(records) == 0 {
		return errors.New("report: RingMap: no records")
	}
	if err := opt.validate(); err != nil {
		return err
	}
	if !(thres > 0) || math.IsInf(thres, 0) || !(roomShare > 0 && roomShare < 1) {
		return fmt.Errorf("report: RingMap: thres %v must be positive and roomShare %v in (0,1)", thres, roomShare)
	}
	var over, light plotter.XYs
	var overLoad []float64 // each dot's load over its node's thres
	xmax := 1.0
	for _, r := range records {
		if err := checkValues("RingRecord.Load", r.Load, false); err != nil {
			return err
		}
		if math.IsNaN(r.T) || math.IsInf(r.T, 0) {
			return fmt.Errorf("report: RingRecord.T is %v", r.T)
		}
		if len(r.Thres) > 0 {
			if len(r.Thres) != len(r.Load) {
				return fmt.Errorf("report: RingRecord at %v has %d thresholds for %d loads", r.T, len(r.Thres), len(r.Load))
			}
			for j, th := range r.Thres {
				if !(th > 0) || math.IsInf(th, 0) {
					return fmt.Errorf("report: RingRecord at %v: thres[%d] = %v must be positive", r.T, j, th)
				}
			}
		}
		xmax = math.Max(xmax, float64(len(r.Load)))
		for i, l := range r.Load {
			th := thres
			if len(r.Thres) > 0 {
				th = r.Thres[i]
			}
			switch {
			case l >= th:
				over = append(over, plotter.XY{X: float64(i), Y: r.T})
				overLoad = append(overLoad, l/th)
			case l < roomShare*th:
				light = append(light, plotter.XY{X: float64(i), Y: r.T})
			}
		}
	}
	p := newPlot(opt, true)
	if len(light) > 0 {
		s, err := plotter.NewScatter(light)
		if err != nil {
			return fmt.Errorf("report: RingMap: %w", err)
		}
		s.GlyphStyle = draw.GlyphStyle{Color: palette[0], Radius: vg.Points(1.2), Shape: draw.CircleGlyph{}}
		p.Add(s)
		p.Legend.Add(fmt.Sprintf("under %.0f%% of thres", 100*roomShare), s)
	}
	if len(over) > 0 {
		s, err := plotter.NewScatter(over)
		if err != nil {
			return fmt.Errorf("report: RingMap: %w", err)
		}
		s.GlyphStyleFunc = func(i int) draw.GlyphStyle {
			// Area in proportion to the load: a lump of three times thres is three times the dot.
			r := vg.Points(1.6 * math.Sqrt(math.Min(overLoad[i], 30)))
			return draw.GlyphStyle{Color: color.NRGBA{R: 0xD5, G: 0x5E, B: 0x00, A: 0xC0}, Radius: r, Shape: draw.CircleGlyph{}}
		}
		p.Add(s)
		p.Legend.Add("at or over thres (dot area grows with load)", s)
	}
	p.X.Min, p.X.Max = 0, xmax
	p.Y.Min, p.Y.Max = records[0].T, records[len(records)-1].T
	if p.Y.Max == p.Y.Min {
		p.Y.Max = p.Y.Min + 1
	}
	applyYLimits(p, opt)
	p.Legend.Top = true
	return saveFigure(path, plotWidth, 6*vg.Inch, func(dc draw.Canvas) { p.Draw(dc) })
}
