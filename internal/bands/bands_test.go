package bands

import (
	"bytes"
	"errors"
	"image/color"
	"image/png"
	"testing"
)

func TestDrawsBarsAndLabels(t *testing.T) {
	blue := color.RGBA{0x3b, 0x76, 0xaf, 0xff}
	c := Chart{Title: "t", Axis: "ms", Rows: []Row{
		{Label: "alone", Bars: []Bar{{To: 1.27, Color: blue}}},
		{Label: "shared", Bars: []Bar{{To: 1.5, Color: blue}, {To: 0.5, Color: refC, Thin: true}}},
	}, Legend: []Key{{"everything", blue}}}
	var buf bytes.Buffer
	if err := c.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	// The second row's thin bar lies over its thick one, in the middle of the row.
	var blueN, redN int
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			switch color.RGBAModel.Convert(img.At(x, y)).(color.RGBA) {
			case blue:
				blueN++
			case refC:
				redN++
			}
		}
	}
	if blueN < 1000 || redN < 100 {
		t.Fatalf("bars not drawn: %d blue, %d red pixels", blueN, redN)
	}
}

func TestLogAxisAndEmpty(t *testing.T) {
	var buf bytes.Buffer
	if err := (&Chart{}).Encode(&buf); !errors.Is(err, ErrEmpty) {
		t.Fatalf("empty chart: %v, want ErrEmpty", err)
	}
	c := Chart{Log: true, RefLine: true, Ref: 1, Rows: []Row{{Label: "x", Bars: []Bar{{From: 1, To: 300}}}}}
	if err := c.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	c.Rows[0].Bars[0].To = 0
	if err := c.Encode(&buf); err == nil {
		t.Fatal("log axis accepted 0")
	}
}
