package ctld

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"corral/accounting/usageplot"
	"corral/api"
	"corral/ctld/state"
	"corral/ctld/statuspage"
	"corral/display"
)

// This file serves the status page (/ui/): the queue, the nodes, a job's
// details and why it waits, and the usage plot, read from this member's
// state under the API's access rules: the page's queue is GET
// /v1/queue's jobs for the same caller, its job page GET /v1/jobs/{id}
// and /why's. Package statuspage renders it.
//
// A browser cannot send a bearer token by itself, so on a cluster that
// authenticates (--auth) the page also takes HTTP Basic credentials whose
// password is a token (`corral token create --ops read`): a browser asks
// for them when a page answers 401. Only the page's routes take them: a
// browser sends remembered Basic credentials with any request to their
// path, and the page changes nothing, so a page of another site that
// makes the browser load it learns nothing and changes nothing (the API's
// writes never take Basic credentials).

// uiPrefix starts every route of the page.
const uiPrefix = "/ui/"

// isUI reports whether r is for the page.
func isUI(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, uiPrefix) }

// basicToken reads the token of HTTP Basic credentials (the password; the
// user name is ignored: the token names its user).
func basicToken(cred string) (string, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return "", unauthorized("the Basic credentials are not base64: give any user name and a token as the password")
	}
	_, token, ok := strings.Cut(string(raw), ":")
	if !ok || token == "" {
		return "", unauthorized("the Basic credentials carry no password: give a token (corral token create --ops read) as the password")
	}
	return token, nil
}

// uiHeaders are the headers of every page: no script may run, nothing
// may frame it, and the browser takes each answer as the type it says.
func uiHeaders(w http.ResponseWriter, contentType string) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Security-Policy", statuspage.ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
}

// uiFrame is what every page shows around its content, for p.
func (c *Controller) uiFrame(r *http.Request, p principal) statuspage.Frame {
	f := statuspage.Frame{Cluster: "corral", Member: c.cfg.ID, Who: whoText(p), Now: c.clock.Now().Local()}
	if _, id := c.node.raft.LeaderWithID(); id != "" {
		f.Leader = string(id)
	}
	if v := r.URL.Query().Get("refresh"); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			f.Refresh = min(max(n, 5), 3600)
		}
	}
	return f
}

// whoText says who the page takes the caller for.
func whoText(p principal) string {
	switch {
	case p.open:
		return "anyone (this cluster does not authenticate)"
	case p.kind == kindUser:
		return fmt.Sprintf("%s (%s)", p.name, p.role)
	}
	return p.String()
}

// writeUIError answers a page's request that failed with an error page,
// and asks a browser for credentials when it sent none or bad ones.
func (c *Controller) writeUIError(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := http.StatusInternalServerError, err.Error()
	var fe *fieldError
	var he *httpError
	switch {
	case errors.As(err, &fe):
		status, msg = http.StatusBadRequest, fe.Msg
	case errors.As(err, &he):
		status, msg = he.status, he.msg
	default:
		c.log.Warn("status page request failed", "path", r.URL.Path, "err", err)
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="corral", charset="UTF-8"`)
		msg += " (in a browser: any user name, and a token as the password; corral token create --ops read)"
	}
	uiHeaders(w, "text/html; charset=utf-8")
	w.WriteHeader(status)
	page := &statuspage.ErrorPage{Frame: statuspage.Frame{Cluster: "corral", Member: c.cfg.ID, Who: "-", Now: c.clock.Now().Local()},
		Status: status, Title: http.StatusText(status), Message: msg}
	_ = statuspage.Error(w, page)
}

// uiRender renders a page into a buffer first, so that a failure midway
// still answers with an error page rather than half a page.
func uiRender(w http.ResponseWriter, render func(*bytes.Buffer) error) error {
	var buf bytes.Buffer
	if err := render(&buf); err != nil {
		return err
	}
	uiHeaders(w, "text/html; charset=utf-8")
	_, err := w.Write(buf.Bytes())
	return err
}

// uiDays reads the plot's window, ?days (1 to 366, default 7).
func uiDays(r *http.Request) (int, error) {
	v := r.URL.Query().Get("days")
	if v == "" {
		return 7, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 366 {
		return 0, &fieldError{Field: "days", Msg: fmt.Sprintf("days=%q: give the days the plot covers, 1 to 366", v)}
	}
	return n, nil
}

// handleUIOverview is GET /ui/ (and answers 404 for any other page under
// it that no route takes): the summary, the queue (the jobs GET
// /v1/queue shows the caller, in its order and fields; the same filters:
// ?user=, ?state=, ?partition=, ...), the nodes and the usage plot.
func (c *Controller) handleUIOverview(w http.ResponseWriter, r *http.Request) error {
	if r.URL.Path != uiPrefix {
		return notFound("%s: no such page; the status page is %s", r.URL.Path, uiPrefix)
	}
	f, err := filterFromQuery(r)
	if err != nil {
		return err
	}
	days, err := uiDays(r)
	if err != nil {
		return err
	}
	p := principalFrom(r)
	page := &statuspage.OverviewPage{Frame: c.uiFrame(r, p), Days: days, Filter: filterText(r)}
	page.QueueHeader, page.Queue, err = c.uiQueue(p, &f, page.Now)
	if err != nil {
		return err
	}
	page.Nodes, page.Summary = c.uiNodes(page.Queue)
	if c.acctStore() != nil {
		page.PlotURL = fmt.Sprintf("%susage.svg?days=%d", uiPrefix, days)
	}
	return uiRender(w, func(b *bytes.Buffer) error { return statuspage.Overview(b, page) })
}

// uiQueue is the queue p sees under filter f, as corral queue lays it out.
func (c *Controller) uiQueue(p principal, f *api.JobFilter, now time.Time) ([]string, []statuspage.QueueRow, error) {
	prio := c.priorityFunc(now)
	jobs := c.matchJobs(p, f)
	sortForQueue(jobs, prio)
	header, cells, err := display.QueueTable(slimJobs(jobs, prio), display.QueueOptions{}, now)
	if err != nil {
		return nil, nil, err
	}
	out := make([]statuspage.QueueRow, len(cells))
	for i, r := range cells {
		out[i].ID, out[i].Rest = r.Cells[0], r.Cells[1:]
		if !r.Job.IsArrayPending() {
			out[i].Ref = r.Job.Ref()
		}
	}
	return header, out, nil
}

// uiNodes lists the nodes as corral nodes shows them (every user may see
// them) and counts the summary: jobs by state from the queue's rows,
// nodes by state.
func (c *Controller) uiNodes(queue []statuspage.QueueRow) ([]statuspage.NodeRow, []statuspage.Count) {
	var out []statuspage.NodeRow
	byState := map[string]int{}
	c.fsm.Read(func(s *state.State) {
		for _, name := range sortedKeys(s.Nodes) {
			n := apiNode(s, s.Nodes[name])
			st := strings.ToLower(string(n.State()))
			byState[st]++
			out = append(out, statuspage.NodeRow{Name: n.Name, State: st,
				CPUs:   fmt.Sprintf("%d/%d", n.AllocCPUs, n.CPUs),
				Memory: fmt.Sprintf("%s/%s", memText(n.AllocMemMB), memText(n.MemMB)), Partitions: strings.Join(n.Partitions, ","),
				Runner: n.Runner, Reason: n.Reason, ReasonBy: n.ReasonUser, ReasonAt: n.ReasonTime.Local(), LastSeen: n.LastSeen.Local(), Jobs: len(n.Jobs)})
		}
	})
	jobs := map[string]int{}
	for _, r := range queue {
		jobs[r.Rest[3]]++ // ST, squeue's compact state
	}
	sum := []statuspage.Count{{Label: "running", N: jobs["R"]}, {Label: "pending", N: jobs["PD"]}, {Label: "jobs shown", N: len(queue)}, {Label: "nodes", N: len(out)}}
	for _, st := range slices.Sorted(maps.Keys(byState)) {
		sum = append(sum, statuspage.Count{Label: "nodes " + st, N: byState[st]})
	}
	return out, sum
}

// memText shows MiB as corral nodes does: G with one decimal from 1 GiB.
func memText(mb int64) string {
	if mb >= 1024 {
		return strconv.FormatFloat(float64(mb)/1024, 'f', 1, 64) + "G"
	}
	return strconv.FormatInt(mb, 10) + "M"
}

// filterText says what the page's query narrows the queue to.
func filterText(r *http.Request) string {
	var parts []string
	q := r.URL.Query()
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if k == "refresh" || k == "days" {
			continue
		}
		parts = append(parts, k+"="+strings.Join(q[k], ","))
	}
	return strings.Join(parts, " ")
}

// handleUIJob is GET /ui/jobs/{id}: the job as corral show job prints it
// and corral why's explanation, for a job the caller may see.
func (c *Controller) handleUIJob(w http.ResponseWriter, r *http.Request) error {
	p := principalFrom(r)
	j, err := c.showJob(p, r.PathValue("id"))
	if err != nil {
		return err
	}
	why, err := c.why(p, r.PathValue("id"))
	if err != nil {
		return err
	}
	page := &statuspage.JobPage{Frame: c.uiFrame(r, p), Ref: j.Ref(), State: string(j.State), Why: why.Lines}
	var show strings.Builder
	display.ShowJob(&show, j, page.Now)
	page.Show = show.String()
	return uiRender(w, func(b *bytes.Buffer) error { return statuspage.Job(b, page) })
}

// handleUIUsage is GET /ui/usage.svg: the usage plot of the last ?days
// (default 7) over the runs the caller may see, as corral acct report
// --svg draws it.
func (c *Controller) handleUIUsage(w http.ResponseWriter, r *http.Request) error {
	days, err := uiDays(r)
	if err != nil {
		return err
	}
	now := c.clock.Now()
	series, err := c.usageSeries(principalFrom(r), now.Add(-time.Duration(days)*24*time.Hour), now, 0)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := usageplot.SVG(&buf, series, usageplot.Options{Location: time.Local}); err != nil {
		return err
	}
	uiHeaders(w, "image/svg+xml")
	_, err = w.Write(buf.Bytes())
	return err
}
