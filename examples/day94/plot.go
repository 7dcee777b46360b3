package main

import (
	"fmt"
	"html"
	"os"
	"strings"
)

// savePlot draws the schedules as bands on the GPU clock, as an SVG file:
// for each schedule a bar from 0 to "everything done", and over it a
// thinner, darker bar to "short done", so the two customers of each
// schedule read side by side. (SVG is text: an example can draw it with
// the standard library alone and stay on the SDK's public API.)
func savePlot(path string, s []Schedule) error {
	const left, width, rowH, top = 180, 560, 34, 48
	most := 0.0
	for _, r := range s {
		most = max(most, r.AllDone, r.ShortDone)
	}
	if most <= 0 {
		most = 1
	}
	x := func(ms float64) float64 { return left + ms/most*width }
	var b strings.Builder
	h := top + rowH*len(s) + 40
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", left+width+40, h)
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14">day 94 on the SDK: when the short jobs and everything finish (GPU clock, ms since start)</text>`+"\n")
	fmt.Fprintf(&b, `<rect x="%d" y="28" width="12" height="10" fill="#9ec3e6"/><text x="%d" y="37">everything done</text>`, left, left+16)
	fmt.Fprintf(&b, `<rect x="%d" y="28" width="12" height="10" fill="#d95319"/><text x="%d" y="37">short jobs done</text>`+"\n", left+160, left+176)
	for i, r := range s {
		y := top + rowH*i
		fmt.Fprintf(&b, `<text x="10" y="%d">%s</text>`, y+18, html.EscapeString(r.Name))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="22" fill="#9ec3e6"/>`, left, y+4, x(r.AllDone)-left)
		if r.ShortDone > 0 {
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="8" fill="#d95319"/>`, left, y+11, x(r.ShortDone)-left)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%.1f</text>`+"\n", x(r.AllDone)+4, y+18, r.AllDone)
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`, left, h-36, left+width, h-36)
	fmt.Fprintf(&b, `<text x="%d" y="%d">0</text><text x="%d" y="%d" text-anchor="end">%.1f ms</text>`+"\n", left, h-20, left+width, h-20, most)
	b.WriteString("</svg>\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
