package main

import (
	"image/color"

	"github.com/fcsp-go/fcsp-go/internal/bands"
)

// savePlot draws the schedules as bands on the GPU clock: for each
// schedule a bar from 0 to "everything done", and over it a thinner, darker
// bar to "short done", so the two customers of each schedule read side by
// side.
func savePlot(path string, s []Schedule) error {
	all := color.RGBA{R: 0x9e, G: 0xc3, B: 0xe6, A: 0xff}
	short := color.RGBA{R: 0xd9, G: 0x53, B: 0x19, A: 0xff}
	c := bands.Chart{
		Title:  "day 94 on the SDK: when the short jobs and everything finish (GPU clock)",
		Axis:   "ms since start",
		Legend: []bands.Key{{Label: "everything done", Color: all}, {Label: "short jobs done", Color: short}},
	}
	for _, r := range s {
		row := bands.Row{Label: r.Name, Bars: []bands.Bar{{To: r.AllDone, Color: all}}}
		if r.ShortDone > 0 {
			row.Bars = append(row.Bars, bands.Bar{To: r.ShortDone, Color: short, Thin: true})
		}
		c.Rows = append(c.Rows, row)
	}
	return c.Save(path)
}
