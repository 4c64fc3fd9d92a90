package ui

import (
	"fmt"
	"strconv"

	"github.com/execstore/execstore/internal/inspect"
)

// rateMinutes is how many minutes the overview's charts show.
const rateMinutes = 60

// barChart is a small bar chart the server draws as SVG: one bar per minute, each a stack of
// segments, scaled to the tallest. No script draws it.
type barChart struct {
	Title         string
	Width, Height int // the viewBox
	Bars          []chartBar
	Top           string // the tallest bar's value, labelled at the top
	First, Last   string // the first and last minutes
	Empty         bool   // every bar is 0
}

// chartBar is one minute's bar: its place, its segments bottom up, and its tooltip.
type chartBar struct {
	X, W     string
	Segments []chartSegment
	Title    string
}

// chartSegment is one part of a bar, styled by its class.
type chartSegment struct {
	Y, H  string
	Class string
}

// chartWidth and chartHeight are the charts' viewBox.
const chartWidth, chartHeight = 600, 90

// rateCharts are the overview's two charts of r: what the handlers did per minute
// (delivered and fired, failed, dead, stacked), and the oldest wait the scans found.
func rateCharts(r *inspect.Rates) []barChart {
	handled := make([][]float64, len(r.Minutes))
	age := make([][]float64, len(r.Minutes))
	titles := make([]string, len(r.Minutes))
	ages := make([]string, len(r.Minutes))
	for i, m := range r.Minutes {
		handled[i] = []float64{float64(m.Delivered + m.Fired), float64(m.Failed), float64(m.Dead)}
		age[i] = []float64{m.AgeSeconds}
		titles[i] = fmt.Sprintf("%s: %d delivered, %d timers fired, %d failed, %d dead", m.Minute, m.Delivered, m.Fired, m.Failed, m.Dead)
		ages[i] = fmt.Sprintf("%s: oldest wait %.1fs", m.Minute, m.AgeSeconds)
	}
	first, last := "", ""
	if n := len(r.Minutes); n > 0 {
		first, last = r.Minutes[0].Minute, r.Minutes[n-1].Minute
	}
	return []barChart{
		drawBars("Handled per minute: delivered and fired, failed, dead", handled, []string{"ok", "failed", "dead"}, titles, first, last, "%.0f"),
		drawBars("Oldest wait found per minute (seconds)", age, []string{"age"}, ages, first, last, "%.1fs"),
	}
}

// drawBars lays out one bar per row of stacks (its segments bottom up, classed by classes),
// scaled so the tallest fills the chart.
func drawBars(title string, stacks [][]float64, classes, titles []string, first, last, topFormat string) barChart {
	c := barChart{Title: title, Width: chartWidth, Height: chartHeight, First: first, Last: last}
	top := 0.0
	for _, s := range stacks {
		sum := 0.0
		for _, v := range s {
			sum += v
		}
		top = max(top, sum)
	}
	c.Empty = top == 0
	c.Top = fmt.Sprintf(topFormat, top)
	if len(stacks) == 0 {
		return c
	}
	slot := float64(chartWidth) / float64(len(stacks))
	num := func(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) }
	for i, s := range stacks {
		b := chartBar{X: num(float64(i)*slot + 1), W: num(max(slot-2, 1)), Title: titles[i]}
		y := float64(chartHeight)
		for j, v := range s {
			if v <= 0 || top == 0 {
				continue
			}
			h := v / top * float64(chartHeight)
			y -= h
			b.Segments = append(b.Segments, chartSegment{Y: num(y), H: num(h), Class: classes[j]})
		}
		c.Bars = append(c.Bars, b)
	}
	return c
}
