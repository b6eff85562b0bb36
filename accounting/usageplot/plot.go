package usageplot

import (
	"cmp"
	"fmt"
	"image/color"
	"io"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette/brewer"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"corral/api"
)

// Measure is what the usage panel stacks.
type Measure string

const (
	CPUHours Measure = "CPU-hours"
	GPUHours Measure = "GPU-hours"
	Billing  Measure = "billing"
)

// Options say what to draw and how large.
type Options struct {
	// Measure is the usage panel's quantity (default CPUHours).
	Measure Measure
	// Title heads the usage panel (default: the window).
	Title string
	// Width and Height are the image's size (default 720 x 640 points).
	Width, Height vg.Length
	// Location is where the time axis's labels are shown (default UTC).
	Location *time.Location
}

// MaxAccounts is how many accounts get bars of their own.
const MaxAccounts = 8

// Other and None name the bars of the accounts beyond MaxAccounts and of
// jobs charged to no account.
const (
	Other = "(other)"
	None  = "(none)"
)

// Stack is one account's bars: its values in the measure, bin by bin.
type Stack struct {
	Account string
	Values  []float64
}

// Stacks returns the usage panel's data: each account's values in m, the
// MaxAccounts largest in total by name, then the rest summed as Other.
// The SVG draws exactly these.
func Stacks(s api.AcctSeries, m Measure) []Stack {
	var all []Stack
	total := map[string]float64{}
	for _, l := range s.Accounts {
		src, per := l.CPUSeconds, 3600.0
		switch m {
		case GPUHours:
			src = l.GPUSeconds
		case Billing:
			src, per = l.Billing, 1
		}
		st := Stack{Account: l.Account, Values: make([]float64, len(src))}
		if st.Account == "" {
			st.Account = None
		}
		for i, v := range src {
			st.Values[i] = v / per
			total[st.Account] += st.Values[i]
		}
		if total[st.Account] > 0 {
			all = append(all, st)
		}
	}
	slices.SortFunc(all, func(a, b Stack) int {
		return cmp.Or(cmp.Compare(total[b.Account], total[a.Account]), cmp.Compare(a.Account, b.Account))
	})
	if len(all) <= MaxAccounts {
		slices.SortFunc(all, func(a, b Stack) int { return cmp.Compare(a.Account, b.Account) })
		return all
	}
	keep, rest := all[:MaxAccounts], all[MaxAccounts:]
	other := Stack{Account: Other, Values: make([]float64, len(rest[0].Values))}
	for _, st := range rest {
		for i, v := range st.Values {
			other.Values[i] += v
		}
	}
	slices.SortFunc(keep, func(a, b Stack) int { return cmp.Compare(a.Account, b.Account) })
	return append(keep, other)
}

// SVG draws s into w.
func SVG(w io.Writer, s api.AcctSeries, o Options) error {
	if o.Measure == "" {
		o.Measure = CPUHours
	}
	if o.Width == 0 {
		o.Width, o.Height = 720, 640
	}
	if o.Location == nil {
		o.Location = time.UTC
	}
	usage, legend, names, err := usagePanel(s, o)
	if err != nil {
		return err
	}
	waits, err := waitPanel(s)
	if err != nil {
		return err
	}
	img := vgsvg.New(o.Width, o.Height)
	dc := draw.New(img)
	// The legend gets a strip of its own right of the usage panel, so
	// that it never hides a bar; both panels share the rest, their axes
	// aligned.
	strip := legendWidth(&legend, names)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Points(18), PadTop: vg.Points(6), PadBottom: vg.Points(6),
		PadLeft: vg.Points(6), PadRight: vg.Points(6)}
	canvases := plot.Align([][]*plot.Plot{{usage}, {waits}}, tiles, draw.Crop(dc, 0, -strip, 0, 0))
	usage.Draw(canvases[0][0])
	waits.Draw(canvases[1][0])
	top := canvases[0][0].Rectangle
	legend.Draw(draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
		Min: vg.Point{X: top.Max.X + vg.Points(8), Y: top.Min.Y}, Max: vg.Point{X: dc.Max.X, Y: top.Max.Y - vg.Points(20)}}})
	_, err = img.WriteTo(w)
	return err
}

// legendWidth is the strip the legend's longest entry needs.
func legendWidth(l *plot.Legend, names []string) vg.Length {
	widest := vg.Length(0)
	for _, name := range names {
		widest = max(widest, l.TextStyle.Rectangle(name).Max.X)
	}
	return min(vg.Points(220), widest+l.ThumbnailWidth+vg.Points(24))
}

// barWidth fits n bars across a panel of the image's width (less its
// axis and margins), with a gap between them.
func barWidth(n int, width vg.Length) vg.Length {
	return max(vg.Points(1), min(vg.Points(60), (width-vg.Points(90))/vg.Length(max(n, 1))*0.75))
}

// usagePanel is the stacked bars of usage by account over time, and
// their legend.
func usagePanel(s api.AcctSeries, o Options) (*plot.Plot, plot.Legend, []string, error) {
	legend := plot.NewLegend()
	legend.Left, legend.Top, legend.Padding = true, true, vg.Points(3)
	// Set1's first eight colours differ clearly; its ninth, grey, is
	// (other)'s.
	palette, err := brewer.GetPalette(brewer.TypeQualitative, "Set1", 9)
	if err != nil {
		return nil, legend, nil, err
	}
	colors := palette.Colors()
	var names []string
	p := plot.New()
	p.Title.Text = o.Title
	if p.Title.Text == "" {
		p.Title.Text = fmt.Sprintf("Usage by account, %s - %s", s.Start.In(o.Location).Format("2006-01-02 15:04"), s.End.In(o.Location).Format("2006-01-02 15:04"))
	}
	step := time.Duration(s.Step) * time.Second
	p.X.Label.Text = "time (bins of " + stepText(step) + ")"
	p.Y.Label.Text = string(o.Measure)
	bins := 0
	if step > 0 {
		bins = int((s.End.Sub(s.Start) + step - 1) / step)
	}
	p.NominalX(binLabels(s.Start, step, bins, o.Location)...)
	// Whole bars at both ends.
	p.X.Min, p.X.Max = -0.5, float64(bins)-0.5
	var below *plotter.BarChart
	for i, st := range Stacks(s, o.Measure) {
		bars, err := plotter.NewBarChart(plotter.Values(st.Values), barWidth(bins, o.Width))
		if err != nil {
			return nil, legend, nil, fmt.Errorf("drawing account %s: %w", st.Account, err)
		}
		bars.LineStyle.Width = 0
		bars.Color = colors[i%MaxAccounts]
		if st.Account == Other {
			bars.Color = colors[8]
		}
		if below != nil {
			bars.StackOn(below)
		}
		below = bars
		p.Add(bars)
		legend.Add(shorten(st.Account), bars)
		names = append(names, shorten(st.Account))
	}
	return p, legend, names, nil
}

// shorten cuts a long account name for the legend.
func shorten(name string) string {
	if r := []rune(name); len(r) > 24 {
		return string(r[:23]) + "…"
	}
	return name
}

// waitPanel is the bars of how many jobs waited how long.
func waitPanel(s api.AcctSeries) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Wait before the first start (jobs that started in the window)"
	p.X.Label.Text = "wait"
	p.Y.Label.Text = "jobs"
	values := make(plotter.Values, len(s.Waits))
	labels := make([]string, len(s.Waits))
	for i, b := range s.Waits {
		values[i], labels[i] = float64(b.Jobs), b.Label
	}
	bars, err := plotter.NewBarChart(values, vg.Points(40))
	if err != nil {
		return nil, fmt.Errorf("drawing the waits: %w", err)
	}
	bars.LineStyle.Width = 0
	bars.Color = color.RGBA{R: 70, G: 110, B: 170, A: 255}
	p.Add(bars)
	p.NominalX(labels...)
	p.X.Min, p.X.Max = -0.5, float64(len(labels))-0.5
	return p, nil
}

// binLabels names bins for the time axis, leaving most blank so that at
// most 8 show.
func binLabels(start time.Time, step time.Duration, n int, loc *time.Location) []string {
	layout := "Jan 2 15:04"
	if step >= 24*time.Hour {
		layout = "2006-01-02"
	}
	every := max(1, (n+7)/8)
	out := make([]string, n)
	for i := 0; i < n; i += every {
		out[i] = start.Add(time.Duration(i) * step).In(loc).Format(layout)
	}
	return out
}

// stepText says a bin's length.
func stepText(d time.Duration) string {
	switch {
	case d >= 24*time.Hour && d%(24*time.Hour) == 0:
		if d == 24*time.Hour {
			return "1 day"
		}
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	case d >= time.Hour && d%time.Hour == 0:
		if d == time.Hour {
			return "1 hour"
		}
		return fmt.Sprintf("%d hours", d/time.Hour)
	}
	return d.String()
}
