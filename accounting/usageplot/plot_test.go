package usageplot

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image/color"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot/palette/brewer"

	"corral/api"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// line is an account's series from CPU-hours per bin.
func line(account string, cpuHours ...float64) api.AcctSeriesLine {
	l := api.AcctSeriesLine{Account: account, GPUSeconds: make([]float64, len(cpuHours)), Billing: make([]float64, len(cpuHours))}
	for i, h := range cpuHours {
		l.CPUSeconds = append(l.CPUSeconds, h*3600)
		l.GPUSeconds[i] = h * 1800
		l.Billing[i] = h * 10
	}
	return l
}

func waits(counts ...int) []api.WaitBucket {
	var out []api.WaitBucket
	for i, n := range counts {
		out = append(out, api.WaitBucket{Label: fmt.Sprintf("w%d", i), Jobs: n})
	}
	return out
}

// TestStacks checks the usage panel's data: each account's usage in the
// measure, by name, jobs without an account as (none), and the accounts
// beyond the eight largest summed as (other).
func TestStacks(t *testing.T) {
	s := api.AcctSeries{Accounts: []api.AcctSeriesLine{line("b", 1, 2), line("", 0, 1), line("a", 3, 0), line("idle", 0, 0)}}
	got := Stacks(s, CPUHours)
	want := []Stack{{"(none)", []float64{0, 1}}, {"a", []float64{3, 0}}, {"b", []float64{1, 2}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("CPU-hours stacks %v, want %v (an account without usage left out)", got, want)
	}
	if got := Stacks(s, GPUHours); fmt.Sprint(got[2]) != fmt.Sprint(Stack{"b", []float64{0.5, 1}}) {
		t.Errorf("GPU-hours of b: %v", got[2])
	}
	if got := Stacks(s, Billing); fmt.Sprint(got[2]) != fmt.Sprint(Stack{"b", []float64{10, 20}}) {
		t.Errorf("billing of b: %v", got[2])
	}
	var many api.AcctSeries
	for i := range 11 {
		many.Accounts = append(many.Accounts, line(fmt.Sprintf("a%02d", i), float64(i+1), 1))
	}
	got = Stacks(many, CPUHours)
	var names []string
	for _, st := range got {
		names = append(names, st.Account)
	}
	if want := []string{"a03", "a04", "a05", "a06", "a07", "a08", "a09", "a10", Other}; !slices.Equal(names, want) {
		t.Errorf("stacks of 11 accounts: %v, want the 8 largest and %s", names, Other)
	}
	if o := got[len(got)-1].Values; o[0] != 1+2+3 || o[1] != 3 {
		t.Errorf("(other) = %v, want a00-a02 summed: [6 3]", o)
	}
}

// svgPath is one filled path of the image: its fill and its box.
type svgPath struct {
	fill                   string
	minX, maxX, minY, maxY float64
}

// parseSVG checks that data is well-formed XML with an svg root and
// returns its texts and its filled paths, in document order.
func parseSVG(t *testing.T, data []byte) (texts []string, paths []svgPath) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	var stack []string
	fill := regexp.MustCompile(`fill:(#[0-9A-Fa-f]{6})`)
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if len(stack) == 0 && el.Name.Local != "svg" {
				t.Fatalf("the root element is %s, want svg", el.Name.Local)
			}
			stack = append(stack, el.Name.Local)
			if el.Name.Local != "path" {
				continue
			}
			var d, style string
			for _, a := range el.Attr {
				switch a.Name.Local {
				case "d":
					d = a.Value
				case "style":
					style = a.Value
				}
			}
			m := fill.FindStringSubmatch(style)
			if m == nil {
				continue
			}
			p := svgPath{fill: strings.ToUpper(m[1]), minX: math.Inf(1), maxX: math.Inf(-1), minY: math.Inf(1), maxY: math.Inf(-1)}
			for _, pt := range regexp.MustCompile(`[-0-9.e]+,[-0-9.e]+`).FindAllString(d, -1) {
				xs, ys, _ := strings.Cut(pt, ",")
				x, _ := strconv.ParseFloat(xs, 64)
				y, _ := strconv.ParseFloat(ys, 64)
				p.minX, p.maxX, p.minY, p.maxY = math.Min(p.minX, x), math.Max(p.maxX, x), math.Min(p.minY, y), math.Max(p.maxY, y)
			}
			paths = append(paths, p)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 && stack[len(stack)-1] == "text" {
				texts = append(texts, string(el))
			}
		}
	}
	return texts, paths
}

func hexColor(c color.Color) string {
	r, g, b, _ := c.RGBA()
	return fmt.Sprintf("#%02X%02X%02X", r>>8, g>>8, b>>8)
}

// TestSVGDrawsTheSeries draws a series of known values and reads the
// image back: it is well-formed SVG; it names the panels, the measure,
// every account (a name with markup as text) and every wait bucket; each
// account's bars, in its colour, stand on the account's below and are as
// tall as its values on one scale for all; the wait bars are as tall as
// their counts.
func TestSVGDrawsTheSeries(t *testing.T) {
	s := api.AcctSeries{Start: t0, End: t0.Add(4 * time.Hour), Step: 3600,
		Accounts: []api.AcctSeriesLine{line("chem", 1, 0, 2, 0.5), line("<b>phys</b>", 2, 1, 0, 3)},
		Waits:    waits(3, 0, 1, 6)}
	var buf bytes.Buffer
	if err := SVG(&buf, s, Options{}); err != nil {
		t.Fatal(err)
	}
	texts, paths := parseSVG(t, buf.Bytes())
	for _, want := range []string{"Usage by account, 2026-12-01 00:00 - 2026-12-01 04:00", "CPU-hours", "chem", "<b>phys</b>",
		"Wait before the first start (jobs that started in the window)", "jobs", "w0", "w3", "Dec 1 00:00", "time (bins of 1 hour)"} {
		if !slices.Contains(texts, want) {
			t.Errorf("the image has no text %q; its texts: %q", want, texts)
		}
	}
	if bytes.Contains(buf.Bytes(), []byte("<b>")) {
		t.Error("an account name's markup is in the SVG unescaped")
	}
	pal, _ := brewer.GetPalette(brewer.TypeQualitative, "Set1", 9)
	stacks := Stacks(s, CPUHours) // <b>phys</b>, then chem
	bars := make([][]svgPath, len(stacks))
	for i := range stacks {
		for _, p := range paths {
			if p.fill == hexColor(pal.Colors()[i]) && len(bars[i]) < 4 {
				bars[i] = append(bars[i], p)
			}
		}
		if len(bars[i]) != 4 {
			t.Fatalf("account %s: %d bars in its colour, want 4", stacks[i].Account, len(bars[i]))
		}
	}
	scale := 0.0 // points per CPU-hour
	for i, st := range stacks {
		for b, v := range st.Values {
			h := bars[i][b].maxY - bars[i][b].minY
			if scale == 0 && v > 0 {
				scale = h / v
			}
			if math.Abs(h-v*scale) > 0.05 {
				t.Errorf("%s bin %d: bar %.2f points tall, want %.2f (%v CPU-h)", st.Account, b, h, v*scale, v)
			}
			if i > 0 && math.Abs(bars[i][b].minY-bars[i-1][b].maxY) > 0.05 {
				t.Errorf("%s bin %d: bar starts at %.2f, not on %s's top %.2f", st.Account, b, bars[i][b].minY, stacks[i-1].Account, bars[i-1][b].maxY)
			}
		}
	}
	if scale == 0 {
		t.Fatal("no bar has a height")
	}
	var waitBars []svgPath
	for _, p := range paths {
		if p.fill == "#466EAA" {
			waitBars = append(waitBars, p)
		}
	}
	if len(waitBars) != 4 {
		t.Fatalf("%d wait bars, want 4", len(waitBars))
	}
	per := (waitBars[0].maxY - waitBars[0].minY) / 3
	for i, n := range []int{3, 0, 1, 6} {
		if h := waitBars[i].maxY - waitBars[i].minY; math.Abs(h-float64(n)*per) > 0.05 {
			t.Errorf("wait bar %d: %.2f points tall, want %.2f (%d jobs)", i, h, float64(n)*per, n)
		}
	}
}

// TestSVGOfNothing: an empty series (a new cluster, a user without jobs)
// still draws both panels.
func TestSVGOfNothing(t *testing.T) {
	var buf bytes.Buffer
	if err := SVG(&buf, api.AcctSeries{Start: t0, End: t0.Add(time.Hour), Step: 3600, Waits: waits(0, 0)}, Options{Measure: GPUHours, Title: "nothing"}); err != nil {
		t.Fatal(err)
	}
	texts, _ := parseSVG(t, buf.Bytes())
	if !slices.Contains(texts, "nothing") || !slices.Contains(texts, "GPU-hours") {
		t.Errorf("texts %q", texts)
	}
}
