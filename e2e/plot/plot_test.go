package plot

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"strings"
	"testing"
)

// wellFormed decodes the whole document and returns its character data and the fill/stroke
// colours it uses.
func wellFormed(t *testing.T, svg []byte) (text string, colours map[string]bool) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var sb strings.Builder
	colours = map[string]bool{}
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, svg)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = el.Name.Local
			}
			for _, a := range el.Attr {
				if (a.Name.Local == "stroke" || a.Name.Local == "fill") && strings.HasPrefix(a.Value, "#") {
					colours[a.Value] = true
				}
			}
		case xml.CharData:
			sb.Write(el)
			sb.WriteByte('\n')
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q; want svg", root)
	}
	return sb.String(), colours
}

func TestLineChart(t *testing.T) {
	series := []Series{
		{Name: "baseline", X: []float64{0, 1, 2, 3}, Y: []float64{0.2, 0.5, 0.7, 0.6}},
		{Name: "cdplace <reserve & 2>", X: []float64{0, 1, 2, 3}, Y: []float64{0.3, math.NaN(), 0.9, 0.95}},
		{Name: "single", X: []float64{1.5}, Y: []float64{0.4}},
	}
	svg := LineChart("GPU allocation", "time (s)", "allocated fraction", series)
	text, colours := wellFormed(t, svg)
	for _, want := range []string{"GPU allocation", "time (s)", "allocated fraction", "baseline", "cdplace <reserve & 2>", "single"} {
		if !strings.Contains(text, want) {
			t.Errorf("chart text lacks %q", want)
		}
	}
	for i := range series {
		if !colours[Colour(i)] {
			t.Errorf("series %d's colour %s is not used", i, Colour(i))
		}
	}
	if Colour(0) == Colour(1) || Colour(1) == Colour(2) {
		t.Error("series colours are not distinct")
	}
	// The NaN splits the second series: two polylines would need at least 2 points each, so the
	// second series is a dot and a line.
	if n := bytes.Count(svg, []byte("<polyline")); n != 2 {
		t.Errorf("%d polylines; want 2 (baseline, and cdplace after its gap)", n)
	}
}

func TestLineChartEmpty(t *testing.T) {
	wellFormed(t, LineChart("", "", "", nil))
	wellFormed(t, LineChart("flat", "x", "y", []Series{{Name: "c", X: []float64{1, 2}, Y: []float64{3, 3}}}))
}

func TestBarChart(t *testing.T) {
	groups := []string{"500 trays", "5,000 trays", "20,000 trays"}
	series := []Series{
		{Name: "pods/s cdplace", Y: []float64{120, 95, 60}},
		{Name: "pods/s default", Y: []float64{150, 140, math.Inf(1)}},
	}
	svg := BarChart("Throughput by fleet size", "pods per second", groups, series)
	text, colours := wellFormed(t, svg)
	for _, want := range append(groups, "Throughput by fleet size", "pods per second", "pods/s cdplace", "pods/s default") {
		if !strings.Contains(text, want) {
			t.Errorf("chart text lacks %q", want)
		}
	}
	if !colours[Colour(0)] || !colours[Colour(1)] {
		t.Error("series colours missing")
	}
	if n := bytes.Count(svg, []byte("<rect x=")); n < 5 {
		t.Errorf("%d bars (and frames); want the 5 finite values drawn", n)
	}
}

func TestNiceTicks(t *testing.T) {
	tk := niceTicks(0, 0.93, 6)
	if tk.lo != 0 || tk.hi < 0.93 || tk.step != 0.2 {
		t.Errorf("ticks %+v; want 0..1 by 0.2", tk)
	}
	if got := tk.label(0.4); got != "0.4" {
		t.Errorf("label %q", got)
	}
	tk = niceTicks(0, 187, 8)
	if tk.step != 50 || tk.hi != 200 {
		t.Errorf("ticks %+v; want 0..200 by 50", tk)
	}
}
