// Package plot draws small, dependency-free SVG charts for the benchmarks: a line chart (one line
// per series, e.g. GPU allocation over time per scheduler configuration) and a grouped bar chart
// (one bar per series in every group, e.g. throughput per fleet size). The output is a complete
// SVG document; text is XML-escaped, so any series or group name is safe.
package plot

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Series is one named line (X and Y of equal length) or, in BarChart, one bar per group (Y[i]
// is the value in group i; X is ignored).
type Series struct {
	Name string
	X, Y []float64
}

// Palette is the colour of series i (cycled): distinguishable, and readable in grey scale too.
var Palette = []string{
	"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
	"#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
}

// Colour returns the colour of series i.
func Colour(i int) string { return Palette[i%len(Palette)] }

const (
	plotW   = 720 // plot area
	plotH   = 380
	marginL = 78
	marginT = 44
	marginB = 62
	legendW = 24 // swatch and gap; the names' width is added
	fontPx  = 12
)

// frame is the plot area and the value ranges it maps.
type frame struct {
	x0, x1, y0, y1 float64 // value ranges
	left, top      float64 // pixel origin of the plot area
}

func (f frame) px(x float64) float64 {
	if f.x1 == f.x0 {
		return f.left + plotW/2
	}
	return f.left + (x-f.x0)/(f.x1-f.x0)*plotW
}

func (f frame) py(y float64) float64 {
	if f.y1 == f.y0 {
		return f.top + plotH/2
	}
	return f.top + plotH - (y-f.y0)/(f.y1-f.y0)*plotH
}

// LineChart draws every series as a polyline over shared axes with ticks, axis labels, a title
// and a legend. Points with a NaN or infinite coordinate break the line. The y axis includes 0
// when no value is negative.
func LineChart(title, xLabel, yLabel string, series []Series) []byte {
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for i := 0; i < len(s.X) && i < len(s.Y); i++ {
			x, y := s.X[i], s.Y[i]
			if !finite(x) || !finite(y) {
				continue
			}
			xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
			ymin, ymax = math.Min(ymin, y), math.Max(ymax, y)
		}
	}
	if math.IsInf(xmin, 1) { // no points at all
		xmin, xmax, ymin, ymax = 0, 1, 0, 1
	}
	if ymin >= 0 {
		ymin = 0
	}
	xt := niceTicks(xmin, xmax, 8)
	yt := niceTicks(ymin, ymax, 6)
	f := frame{x0: xt.lo, x1: xt.hi, y0: yt.lo, y1: yt.hi, left: marginL, top: marginT}
	if xmax > xmin {
		// The x axis spans the data exactly (a time axis rounded up to the next tick would leave
		// an empty band); only the ticks inside it are drawn.
		f.x0, f.x1 = xmin, xmax
		eps := (xmax - xmin) * 1e-9
		var in []float64
		for _, v := range xt.values {
			if v >= xmin-eps && v <= xmax+eps {
				in = append(in, v)
			}
		}
		xt.values = in
	}

	var b bytes.Buffer
	header(&b, title, series)
	axes(&b, f, xt, yt, xLabel, yLabel, true)
	for i, s := range series {
		colour := Colour(i)
		fmt.Fprintf(&b, "<g class=\"series\" stroke=\"%s\" fill=\"none\" stroke-width=\"2\">\n", colour)
		fmt.Fprintf(&b, "<title>%s</title>\n", esc(s.Name))
		var pts [][2]float64
		flush := func() {
			switch len(pts) {
			case 0:
			case 1: // a lone point: a dot, so that it is visible
				fmt.Fprintf(&b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2\" fill=\"%s\"/>\n", pts[0][0], pts[0][1], colour)
			default:
				b.WriteString("<polyline points=\"")
				for k, p := range pts {
					if k > 0 {
						b.WriteByte(' ')
					}
					fmt.Fprintf(&b, "%.1f,%.1f", p[0], p[1])
				}
				b.WriteString("\"/>\n")
			}
			pts = pts[:0]
		}
		for j := 0; j < len(s.X) && j < len(s.Y); j++ {
			if !finite(s.X[j]) || !finite(s.Y[j]) {
				flush()
				continue
			}
			pts = append(pts, [2]float64{f.px(s.X[j]), f.py(s.Y[j])})
		}
		flush()
		b.WriteString("</g>\n")
	}
	legend(&b, series, false)
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// BarChart draws grouped bars: for every group (x axis, labelled with the group's name) one bar
// per series, side by side, in the series' colour, from 0. series[i].Y[j] is series i's value in
// group j; missing or non-finite values leave a gap.
func BarChart(title, yLabel string, groups []string, series []Series) []byte {
	ymin, ymax := 0.0, 0.0
	for _, s := range series {
		for j := 0; j < len(s.Y) && j < len(groups); j++ {
			if finite(s.Y[j]) {
				ymin, ymax = math.Min(ymin, s.Y[j]), math.Max(ymax, s.Y[j])
			}
		}
	}
	if ymax == ymin {
		ymax = ymin + 1
	}
	yt := niceTicks(ymin, ymax, 6)
	f := frame{x0: 0, x1: float64(max(len(groups), 1)), y0: yt.lo, y1: yt.hi, left: marginL, top: marginT}

	var b bytes.Buffer
	header(&b, title, series)
	axes(&b, f, ticks{}, yt, "", yLabel, false)
	slot := plotW / float64(max(len(groups), 1))
	barW := slot * 0.8 / float64(max(len(series), 1))
	zero := f.py(0)
	for j, g := range groups {
		gx := f.left + float64(j)*slot
		fmt.Fprintf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
			gx+slot/2, f.top+plotH+18, esc(g))
		for i, s := range series {
			if j >= len(s.Y) || !finite(s.Y[j]) {
				continue
			}
			y := f.py(s.Y[j])
			top, h := math.Min(y, zero), math.Abs(zero-y)
			fmt.Fprintf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>%s, %s: %s</title></rect>\n",
				gx+slot*0.1+float64(i)*barW, top, math.Max(barW-1, 1), h, Colour(i), esc(s.Name), esc(g), formatValue(s.Y[j]))
		}
	}
	legend(&b, series, true)
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// header writes the SVG root (the plot area plus room for the legend), background and title.
func header(b *bytes.Buffer, title string, series []Series) {
	longest := 0
	for _, s := range series {
		longest = max(longest, len([]rune(s.Name)))
	}
	width := float64(marginL + plotW + 20 + legendW + longest*7 + 16)
	height := float64(marginT + plotH + marginB)
	fmt.Fprintf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"%d\">\n",
		width, height, width, height, fontPx)
	fmt.Fprintf(b, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n")
	fmt.Fprintf(b, "<text x=\"%.1f\" y=\"24\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">%s</text>\n",
		float64(marginL)+plotW/2, esc(title))
}

// axes draws the frame, grid lines, ticks and axis labels. With xTicks false the x axis has no
// ticks (a bar chart labels its groups itself).
func axes(b *bytes.Buffer, f frame, xt, yt ticks, xLabel, yLabel string, xTicks bool) {
	bottom := f.top + plotH
	b.WriteString("<g class=\"axes\" stroke=\"#333\" stroke-width=\"1\">\n")
	for _, v := range yt.values {
		y := f.py(v)
		fmt.Fprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", f.left, y, f.left+plotW, y)
		fmt.Fprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", f.left-5, y, f.left, y)
	}
	if xTicks {
		for _, v := range xt.values {
			x := f.px(v)
			fmt.Fprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", x, f.top, x, bottom)
			fmt.Fprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x, bottom, x, bottom+5)
		}
	}
	fmt.Fprintf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"none\"/>\n", f.left, f.top, plotW, plotH)
	b.WriteString("</g>\n<g class=\"labels\" fill=\"#222\">\n")
	for _, v := range yt.values {
		fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", f.left-8, f.py(v)+4, yt.label(v))
	}
	if xTicks {
		for _, v := range xt.values {
			fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", f.px(v), bottom+18, xt.label(v))
		}
	}
	if xLabel != "" {
		fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", f.left+plotW/2, bottom+44, esc(xLabel))
	}
	if yLabel != "" {
		cx, cy := 18.0, f.top+plotH/2
		fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 %.1f %.1f)\">%s</text>\n",
			cx, cy, cx, cy, esc(yLabel))
	}
	b.WriteString("</g>\n")
}

// legend lists the series right of the plot area: a swatch (a line or a square) and the name.
func legend(b *bytes.Buffer, series []Series, squares bool) {
	x := float64(marginL + plotW + 20)
	b.WriteString("<g class=\"legend\">\n")
	for i, s := range series {
		y := float64(marginT) + 10 + float64(i)*20
		if squares {
			fmt.Fprintf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"10\" fill=\"%s\"/>\n", x, y-5, Colour(i))
		} else {
			fmt.Fprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"/>\n", x, y, x+16, y, Colour(i))
		}
		fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", x+legendW, y+4, esc(s.Name))
	}
	b.WriteString("</g>\n")
}

// ticks are round values covering [lo, hi], step apart.
type ticks struct {
	lo, hi, step float64
	values       []float64
}

// niceTicks picks about n round tick values (1, 2 or 5 times a power of ten apart) whose range
// covers [lo, hi].
func niceTicks(lo, hi float64, n int) ticks {
	if hi < lo {
		lo, hi = hi, lo
	}
	if hi == lo {
		pad := math.Max(math.Abs(lo)*0.1, 1)
		lo, hi = lo-pad, hi+pad
		if lo < 0 && hi-pad >= 0 {
			lo = 0
		}
	}
	step := niceNum((hi - lo) / float64(max(n-1, 1)))
	t := ticks{lo: math.Floor(lo/step) * step, hi: math.Ceil(hi/step) * step, step: step}
	for v := t.lo; v <= t.hi+step/2; v += step {
		t.values = append(t.values, math.Round(v/step)*step)
	}
	return t
}

func niceNum(x float64) float64 {
	if x <= 0 || !finite(x) {
		return 1
	}
	exp := math.Floor(math.Log10(x))
	f := x / math.Pow(10, exp)
	var nf float64
	switch {
	case f <= 1:
		nf = 1
	case f <= 2:
		nf = 2
	case f <= 5:
		nf = 5
	default:
		nf = 10
	}
	return nf * math.Pow(10, exp)
}

// label formats a tick with as many decimals as the step needs.
func (t ticks) label(v float64) string {
	dec := 0
	if t.step > 0 && t.step < 1 {
		dec = int(math.Ceil(-math.Log10(t.step) - 1e-9))
	}
	if v == 0 {
		v = 0 // no "-0"
	}
	return strconv.FormatFloat(v, 'f', dec, 64)
}

func formatValue(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
