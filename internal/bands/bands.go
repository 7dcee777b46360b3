// Package bands draws horizontal bar charts (one labelled row of bars per
// item, an axis with ticks, a legend) into a PNG with the standard library
// alone: the examples' charts, without a plotting module to download.
package bands

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"os"
	"strconv"
)

// Chart is one chart: rows from the top down, each with its bars.
type Chart struct {
	Title  string
	Axis   string // under the x axis
	Rows   []Row
	Legend []Key
	// Log draws the x axis in decades (values must be > 0).
	Log bool
	// Ref, when RefLine is set, draws a dashed vertical line at that value
	// (1 for ratios).
	Ref     float64
	RefLine bool
}

// Row is one labelled row.
type Row struct {
	Label string
	Bars  []Bar
}

// Bar spans From to To on the x axis; Thin bars are drawn over thick ones.
type Bar struct {
	From, To float64
	Color    color.RGBA
	Thin     bool
}

// Key is one legend entry.
type Key struct {
	Label string
	Color color.RGBA
}

// ErrEmpty is returned for a chart with nothing to draw.
var ErrEmpty = errors.New("bands: no bars to draw")

const (
	charW, charH = 7, 13
	rowH         = 26
	pad          = 12
	plotW        = 640
)

var (
	ink   = color.RGBA{0x20, 0x20, 0x20, 0xff}
	grid  = color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	refC  = color.RGBA{0xc0, 0x00, 0x00, 0xff}
	white = color.RGBA{0xff, 0xff, 0xff, 0xff}
)

// Save writes the chart to path as a PNG.
func (c *Chart) Save(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := c.Encode(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Encode writes the chart as a PNG.
func (c *Chart) Encode(w io.Writer) error {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range c.Rows {
		for _, b := range r.Bars {
			lo, hi = min(lo, b.From, b.To), max(hi, b.From, b.To)
		}
	}
	if math.IsInf(lo, 0) {
		return ErrEmpty
	}
	if c.RefLine {
		lo, hi = min(lo, c.Ref), max(hi, c.Ref)
	}
	scale := func(v float64) float64 { return v }
	var ticks []float64
	if c.Log {
		if lo <= 0 {
			return fmt.Errorf("bands: log axis with a value %g <= 0", lo)
		}
		scale = math.Log10
		lo, hi = math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
		if hi == lo {
			hi++
		}
		for k := lo; k <= hi; k++ {
			ticks = append(ticks, math.Pow(10, k))
		}
	} else {
		lo = min(lo, 0)
		step := niceStep((hi - lo) / 5)
		hi = math.Ceil(hi*1.05/step) * step
		for v := lo; v <= hi+step/2; v += step {
			ticks = append(ticks, v)
		}
	}
	labelW := 0
	for _, r := range c.Rows {
		labelW = max(labelW, len(r.Label)*charW)
	}
	x0 := pad + labelW + pad
	top := pad + charH + pad
	legendH := len(c.Legend) * (charH + 4)
	height := top + len(c.Rows)*rowH + pad + charH + 4 + charH + pad + legendH + pad
	width := max(x0+plotW+pad*4, pad+len(c.Title)*charW+pad)
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	draw.Draw(img, img.Bounds(), &image.Uniform{white}, image.Point{}, draw.Src)
	xAt := func(v float64) int {
		return x0 + int(math.Round((scale(v)-lo)/(hi-lo)*plotW))
	}
	bottom := top + len(c.Rows)*rowH
	text(img, pad, pad, c.Title, ink)
	for _, t := range ticks {
		x := xAt(t)
		fill(img, x, top, x+1, bottom, grid)
		s := strconv.FormatFloat(t, 'g', 4, 64)
		if c.Log {
			s += "x"
		}
		text(img, x-len(s)*charW/2, bottom+4, s, ink)
	}
	text(img, x0+plotW/2-len(c.Axis)*charW/2, bottom+4+charH+4, c.Axis, ink)
	for i, r := range c.Rows {
		y := top + i*rowH
		text(img, x0-pad-len(r.Label)*charW, y+(rowH-charH)/2, r.Label, ink)
		for _, thin := range []bool{false, true} {
			for _, b := range r.Bars {
				if b.Thin != thin {
					continue
				}
				inset := 3
				if thin {
					inset = 9
				}
				a, z := xAt(b.From), xAt(b.To)
				fill(img, min(a, z), y+inset, max(a, z)+1, y+rowH-inset, b.Color)
			}
		}
	}
	fill(img, x0, top, x0+1, bottom, ink)
	fill(img, x0, bottom, x0+plotW+1, bottom+1, ink)
	if c.RefLine {
		x := xAt(c.Ref)
		for y := top; y < bottom; y += 7 {
			fill(img, x, y, x+2, min(y+4, bottom), refC)
		}
	}
	ly := bottom + 4 + 2*charH + pad
	for _, k := range c.Legend {
		fill(img, x0, ly+2, x0+charH*2, ly+charH-2, k.Color)
		text(img, x0+charH*2+6, ly, k.Label, ink)
		ly += charH + 4
	}
	return png.Encode(w, img)
}

// niceStep rounds a tick step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if !(raw > 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func fill(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	draw.Draw(img, image.Rect(x0, y0, x1, y1), &image.Uniform{c}, image.Point{}, draw.Src)
}

// text draws s with its top-left corner at (x, y).
func text(img *image.RGBA, x, y int, s string, c color.RGBA) {
	for _, r := range s {
		g := len(glyphs) - 1
		if r >= 32 && r < 127 {
			g = int(r - 32)
		}
		for row, bits := range glyphs[g] {
			for col := 0; col < 7; col++ {
				if bits&(1<<(6-col)) != 0 {
					img.SetRGBA(x+col, y+row, c)
				}
			}
		}
		x += charW
	}
}
