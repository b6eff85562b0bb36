package statuspage

import (
	"embed"
	"html/template"
	"io"
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
// page of their own), Cells are corral queue's fields.
type QueueRow struct {
	Ref   string
	Cells []string
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
func Overview(w io.Writer, p *OverviewPage) error { return pages.ExecuteTemplate(w, "overview", p) }

// Job writes a job's page.
func Job(w io.Writer, p *JobPage) error { return pages.ExecuteTemplate(w, "job", p) }

// Error writes an error page.
func Error(w io.Writer, p *ErrorPage) error { return pages.ExecuteTemplate(w, "error", p) }
