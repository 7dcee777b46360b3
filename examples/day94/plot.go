package main

import (
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// savePlot draws the schedules as bands on the GPU clock: for each
// schedule a bar from 0 to "everything done", and over it a darker bar to
// "short done", so the two customers of each schedule read side by side.
func savePlot(path string, s []Schedule) error {
	p := plot.New()
	p.Title.Text = "day 94 on the SDK: when the short jobs and everything finish (GPU clock)"
	p.X.Label.Text = "ms since start"
	names := make([]string, len(s))
	all, short := make(plotter.Values, len(s)), make(plotter.Values, len(s))
	for i, r := range s {
		j := len(s) - 1 - i // first schedule on top
		names[j], all[j], short[j] = r.Name, r.AllDone, r.ShortDone
	}
	allBars, err := plotter.NewBarChart(all, vg.Points(14))
	if err != nil {
		return err
	}
	allBars.Horizontal = true
	allBars.Color = color.RGBA{R: 0x9e, G: 0xc3, B: 0xe6, A: 0xff}
	allBars.LineStyle.Width = 0
	shortBars, err := plotter.NewBarChart(short, vg.Points(6))
	if err != nil {
		return err
	}
	shortBars.Horizontal = true
	shortBars.Color = color.RGBA{R: 0xd9, G: 0x53, B: 0x19, A: 0xff}
	shortBars.LineStyle.Width = 0
	p.Add(allBars, shortBars)
	p.Legend.Add("everything done", allBars)
	p.Legend.Add("short jobs done", shortBars)
	p.Legend.Top = false // bottom right: the longest band is the last one
	p.NominalY(names...)
	for _, r := range s {
		p.X.Max = max(p.X.Max, 1.35*r.AllDone) // room for the legend
	}
	return p.Save(10*vg.Inch, vg.Length(len(s))*vg.Points(36)+1.5*vg.Inch, path)
}
