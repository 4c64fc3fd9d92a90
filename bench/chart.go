package main

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Size of one panel of the chart, and the strip above the panels that names the server.
const (
	panelWidth  = 17 * vg.Centimeter
	panelHeight = 12 * vg.Centimeter
	headerStrip = 1 * vg.Centimeter
)

// writeChart draws the server-backed variants' events/s to a PNG at path, one line per
// variant in every panel: on the first row, events/s against handler concurrency, one panel
// per round trip; when more than one round trip was measured, on a second row events/s
// against the round trip, one panel at the lowest concurrency measured and one at the
// highest. The memory variant is left out: it runs many times faster than any server-backed
// one, and on the same axis it would flatten their lines (its figures are in the table and
// the JSON).
func writeChart(path string, server string, results []runResult) error {
	var rtts []float64
	var levels []int
	for _, r := range results {
		if !usesServer(r.Variant) {
			continue
		}
		if !slices.Contains(rtts, r.RTTms) {
			rtts = append(rtts, r.RTTms)
		}
		if !slices.Contains(levels, r.Concurrency) {
			levels = append(levels, r.Concurrency)
		}
	}
	slices.Sort(rtts)
	slices.Sort(levels)

	// One events/s scale for every panel, so that panels compare at a glance.
	maxY := 0.0
	for _, r := range results {
		if usesServer(r.Variant) {
			maxY = max(maxY, r.EventsPerS)
		}
	}
	maxY = niceCeil(maxY * 1.4) // headroom for the legend

	rows := [][]*plot.Plot{nil}
	for _, rtt := range rtts {
		p, err := concurrencyPanel(results, rtt, levels)
		if err != nil {
			return err
		}
		rows[0] = append(rows[0], p)
	}
	if len(rtts) > 1 && len(levels) > 0 {
		var row []*plot.Plot
		at := []int{levels[0]}
		if len(levels) > 1 {
			at = append(at, levels[len(levels)-1])
		}
		for _, conc := range at {
			p, err := rttPanel(results, conc, rtts)
			if err != nil {
				return err
			}
			row = append(row, p)
		}
		rows = append(rows, row)
	}
	cols := 0
	for _, row := range rows {
		cols = max(cols, len(row))
	}

	c := vgimg.New(panelWidth*vg.Length(cols), panelHeight*vg.Length(len(rows))+headerStrip)
	dc := draw.New(c)
	header := plot.New().Title.TextStyle
	header.YAlign = draw.YCenter
	dc.FillText(header, vg.Point{X: dc.Center().X, Y: dc.Max.Y - headerStrip/2}, "execstore bench: "+server)
	tiles := draw.Tiles{Rows: len(rows), Cols: cols, PadTop: headerStrip, PadX: vg.Centimeter / 2, PadY: vg.Centimeter / 2}
	for y, row := range rows {
		for x, p := range row {
			p.Y.Max = maxY
			p.Draw(tiles.At(dc, x, y))
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// concurrencyPanel draws events/s against handler concurrency at round trip rttMs.
// Concurrency is on a log scale with a tick at each level measured.
func concurrencyPanel(results []runResult, rttMs float64, levels []int) (*plot.Plot, error) {
	p := newPanel(fmt.Sprintf("events/s by handler concurrency, +%s round trip", rttLabel(rttMs)),
		"concurrency (handler goroutines, log scale)")
	p.X.Scale = plot.LogScale{}
	err := addLines(p, results, func(r runResult) (float64, bool) {
		return float64(r.Concurrency), r.RTTms == rttMs
	})
	if err != nil {
		return nil, err
	}
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
	return p, nil
}

// rttPanel draws events/s against the round trip the proxy adds, at concurrency conc.
func rttPanel(results []runResult, conc int, rtts []float64) (*plot.Plot, error) {
	handlers := "handlers"
	if conc == 1 {
		handlers = "handler"
	}
	p := newPanel(fmt.Sprintf("events/s by round trip, %d %s", conc, handlers), "round trip added by the proxy (ms)")
	err := addLines(p, results, func(r runResult) (float64, bool) {
		return r.RTTms, r.Concurrency == conc
	})
	if err != nil {
		return nil, err
	}
	var ticks plot.ConstantTicks
	for _, ms := range rtts {
		ticks = append(ticks, plot.Tick{Value: ms, Label: strconv.FormatFloat(ms, 'f', -1, 64)})
	}
	p.X.Tick.Marker = ticks
	span := rtts[len(rtts)-1] - rtts[0]
	p.X.Min, p.X.Max = rtts[0]-span/20, rtts[len(rtts)-1]+span/20
	p.Legend.Left = false
	p.Legend.XOffs = vg.Points(-12)
	return p, nil
}

// newPanel returns an empty panel with its title, x label and the events/s axis.
func newPanel(title, xLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.Padding = vg.Points(6)
	p.X.Label.Text = xLabel
	p.Y.Label.Text = "events/s"
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(12)
	p.Legend.YOffs = vg.Points(-6)
	p.Legend.Padding = vg.Points(2)
	p.Add(plotter.NewGrid())
	return p
}

// addLines adds one line per server-backed variant to p, through the results x picks (its
// x value, and whether to draw the result), each variant styled by its place in allVariants
// in every panel.
func addLines(p *plot.Plot, results []runResult, x func(runResult) (float64, bool)) error {
	for i, name := range allVariants {
		if !usesServer(name) {
			continue
		}
		var pts plotter.XYs
		for _, r := range results {
			if xv, ok := x(r); ok && r.Variant == name {
				pts = append(pts, plotter.XY{X: xv, Y: r.EventsPerS})
			}
		}
		if len(pts) == 0 {
			continue
		}
		slices.SortFunc(pts, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
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
	return nil
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
