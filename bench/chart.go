package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// writeChart draws events/s against concurrency, one line per server-backed variant, to a PNG
// at path.
// Concurrency is on a log scale with a tick at each level measured.
func writeChart(path string, cfg config, server string, results []runResult) error {
	p := plot.New()
	p.Title.Text = "execstore bench: events/s by handler concurrency\n" + server
	if cfg.rtt > 0 {
		p.Title.Text += fmt.Sprintf(", +%v round trip", cfg.rtt)
	}
	p.Title.Padding = vg.Points(6)
	p.X.Label.Text = "concurrency (handler goroutines, log scale)"
	p.Y.Label.Text = "events/s"
	p.X.Scale = plot.LogScale{}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(12)
	p.Legend.YOffs = vg.Points(-6)
	p.Legend.Padding = vg.Points(2)
	p.Add(plotter.NewGrid())

	var levels []int
	maxY := 0.0
	for i, name := range allVariants {
		if !usesServer(name) {
			// The memory variant runs many times faster than any server-backed one; on the
			// same axis it would flatten their lines. Its figures are in the table and JSON.
			continue
		}
		var pts plotter.XYs
		for _, r := range results {
			if r.Variant != name {
				continue
			}
			pts = append(pts, plotter.XY{X: float64(r.Concurrency), Y: r.EventsPerS})
			if !slices.Contains(levels, r.Concurrency) {
				levels = append(levels, r.Concurrency)
			}
			maxY = max(maxY, r.EventsPerS)
		}
		if len(pts) == 0 {
			continue
		}
		slices.SortFunc(pts, func(a, b plotter.XY) int { return int(a.X - b.X) })
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		line.Color = plotutil.Color(i)
		line.Width = vg.Points(2)
		line.Dashes = plotutil.Dashes(i)
		points.Color = plotutil.Color(i)
		points.Shape = plotutil.Shape(i)
		points.Radius = vg.Points(3.5)
		p.Add(line, points)
		p.Legend.Add(name, line, points)
	}
	slices.Sort(levels)
	var ticks plot.ConstantTicks
	for _, c := range levels {
		ticks = append(ticks, plot.Tick{Value: float64(c), Label: strconv.Itoa(c)})
	}
	p.X.Tick.Marker = ticks
	if len(levels) > 0 {
		// Some room either side of the levels, on the log scale.
		p.X.Min = float64(levels[0]) / 1.5
		p.X.Max = float64(levels[len(levels)-1]) * 1.5
	}
	p.Y.Min = 0
	p.Y.Max = niceCeil(maxY * 1.4) // headroom for the legend
	return p.Save(20*vg.Centimeter, 13*vg.Centimeter, path)
}

// niceCeil rounds x up to 1, 2 or 5 times a power of ten.
func niceCeil(x float64) float64 {
	if x <= 0 {
		return 1
	}
	pow := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*pow >= x {
			return m * pow
		}
	}
	return 10 * pow
}
