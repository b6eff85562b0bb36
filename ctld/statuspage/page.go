package statuspage

import (
	"embed"
	"html/template"
	"io"
	"net/url"
	"strings"
	"time"
)

//go:embed page.html
var files embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"stamp": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.Format("2006-01-02 15:04:05")
	},
}).ParseFS(files, "page.html"))

// ContentSecurityPolicy is the policy the pages are served under: no
// script, no frames, styles inline, images (the plot) from the controller
// itself.
const ContentSecurityPolicy = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Frame is what every page shows around its content.
type Frame struct {
	// Cluster is the cluster's name; Member the controller that answers,
	// Leader the one that leads (empty when none does).
	Cluster, Member, Leader string
	// Who is the caller as the controllers take them ("alice (user)").
	Who string
	// Now is when the page was made, in the zone its times are shown in.
	Now time.Time
	// Refresh, when positive, reloads the page every Refresh seconds.
	Refresh int
}

// QueueRow is one job of the queue: Ref names it for its page's link
// ("12", "12_5"; empty for an array's folded pending tasks, which have no
// page of their own); ID and Rest are corral queue's fields, the first
// (JOBID) and the others.
type QueueRow struct {
	Ref  string
	ID   string
	Rest []string
}

// NodeRow is one node as corral nodes shows it.
type NodeRow struct {
	Name, State        string
	CPUs, Memory       string
	Partitions, Runner string
	Reason, ReasonBy   string
	ReasonAt, LastSeen time.Time
	Jobs               int
}

// Count is one figure of the page's summary.
type Count struct {
	Label string
	N     int
}

// OverviewPage is the main page: a summary, the queue, the nodes and the
// usage plot.
type OverviewPage struct {
	Frame
	Summary     []Count
	QueueHeader []string
	Queue       []QueueRow
	// Filter says what the queue is narrowed to ("user=alice"), if
	// anything.
	Filter string
	Nodes  []NodeRow
	// PlotURL is the usage plot's address (empty: no plot, e.g. a member
	// without an accounting store); Days the window it covers.
	PlotURL string
	Days    int
}

// JobPage is one job: scontrol show job's text and corral why's lines.
type JobPage struct {
	Frame
	Ref, State string
	Show       string
	Why        []string
}

// ErrorPage is a refusal or failure, said in words.
type ErrorPage struct {
	Frame
	Status  int
	Title   string
	Message string
}

// Overview writes the main page.
func Overview(w io.Writer, p *OverviewPage) error {
	return pages.ExecuteTemplate(w, "overview", overviewView{OverviewPage: p, QueueHTML: queueHTML(p.Queue)})
}

// overviewView is the main page as its template reads it.
type overviewView struct {
	*OverviewPage
	QueueHTML []template.HTML
}

// queueHTML renders the queue's rows ahead of the template: one template
// action per row instead of one per cell makes a page of 10,000 jobs
// several times faster (BenchmarkStatusPage; html/template calls each
// action's escapers by reflection). Every value is escaped with
// html/template's own escaper; the markup around them is fixed, values
// only ever land in element content and, for the job's link, in a quoted
// attribute (path-escaped first).
func queueHTML(rows []QueueRow) []template.HTML {
	out := make([]template.HTML, len(rows))
	var b strings.Builder
	for i, r := range rows {
		b.Reset()
		b.WriteString("<tr><td>")
		if r.Ref != "" {
			b.WriteString(`<a href="/ui/jobs/`)
			b.WriteString(template.HTMLEscapeString(url.PathEscape(r.Ref)))
			b.WriteString(`">`)
			b.WriteString(template.HTMLEscapeString(r.ID))
			b.WriteString("</a>")
		} else {
			b.WriteString(template.HTMLEscapeString(r.ID))
		}
		b.WriteString("</td>")
		for _, c := range r.Rest {
			b.WriteString("<td>")
			b.WriteString(template.HTMLEscapeString(c))
			b.WriteString("</td>")
		}
		b.WriteString("</tr>\n")
		out[i] = template.HTML(b.String())
	}
	return out
}

// Job writes a job's page.
func Job(w io.Writer, p *JobPage) error { return pages.ExecuteTemplate(w, "job", p) }

// Error writes an error page.
func Error(w io.Writer, p *ErrorPage) error { return pages.ExecuteTemplate(w, "error", p) }
