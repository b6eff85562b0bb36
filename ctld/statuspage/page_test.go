package statuspage

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
)

const hostile = `<script>alert("x")</script>&'"`

// elements counts the elements of each name in an HTML document, and
// collects the text of its elements with the given id.
func parse(t *testing.T, doc []byte) (map[string]int, map[string]string) {
	t.Helper()
	root, err := html.Parse(bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	count, text := map[string]int{}, map[string]string{}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			count[n.Data]++
			for _, a := range n.Attr {
				if a.Key == "id" {
					text[a.Val] = textOf(n)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(root)
	return count, text
}

func textOf(n *html.Node) string {
	if n.Type == html.TextNode {
		return n.Data
	}
	var b strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		b.WriteString(textOf(c))
	}
	return b.String()
}

// TestPagesEscapeEverything renders each page with markup in every value
// a client can choose (job names and refs, users, node reasons, why's
// lines, an error's message): the documents hold no script element, and
// the values come back as their text.
func TestPagesEscapeEverything(t *testing.T) {
	f := Frame{Cluster: "corral", Member: "c1", Leader: "c1", Who: hostile, Now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Refresh: 10}
	var b bytes.Buffer
	err := Overview(&b, &OverviewPage{Frame: f, QueueHeader: []string{"JOBID", "NAME"},
		Queue:  []QueueRow{{Ref: `7"><script>`, ID: "7", Rest: []string{hostile}}, {ID: "8_[1-3]", Rest: []string{"x"}}},
		Nodes:  []NodeRow{{Name: "n1", State: "drained", Reason: hostile, ReasonBy: hostile}},
		Filter: hostile, PlotURL: "/ui/usage.svg?days=7", Days: 7})
	if err != nil {
		t.Fatal(err)
	}
	count, text := parse(t, b.Bytes())
	if count["script"] != 0 || count["tr"] != 5 || count["a"] != 2 { // 2 header rows, 2 jobs, a node; the title's link and one job's
		t.Errorf("elements %v: want no script, 5 rows, 2 links\n%s", count, b.String())
	}
	if !strings.Contains(text["queue-table"], hostile) || !strings.Contains(text["node-table"], hostile) {
		t.Errorf("the tables' text lost the values:\n%q\n%q", text["queue-table"], text["node-table"])
	}
	if !bytes.Contains(b.Bytes(), []byte(`<a href="/ui/jobs/7%22%3E%3Cscript%3E">7</a>`)) {
		t.Errorf("the job link is not path-escaped:\n%s", b.String())
	}
	b.Reset()
	if err := Job(&b, &JobPage{Frame: f, Ref: "7", State: "PENDING", Show: "JobName=" + hostile, Why: []string{hostile}}); err != nil {
		t.Fatal(err)
	}
	count, text = parse(t, b.Bytes())
	if count["script"] != 0 || text["show"] != "JobName="+hostile || text["why"] != hostile {
		t.Errorf("the job page: %v %q %q", count, text["show"], text["why"])
	}
	b.Reset()
	if err := Error(&b, &ErrorPage{Frame: f, Status: 404, Title: "Not Found", Message: hostile}); err != nil {
		t.Fatal(err)
	}
	if count, text = parse(t, b.Bytes()); count["script"] != 0 || text["error"] != hostile {
		t.Errorf("the error page: %v %q", count, text["error"])
	}
}

// BenchmarkOverview renders the main page of 10,000 jobs (the template
// alone; ctld's BenchmarkStatusPage measures the whole request).
func BenchmarkOverview(b *testing.B) {
	p := &OverviewPage{Frame: Frame{Cluster: "corral", Now: time.Now()}, QueueHeader: []string{"JOBID", "PARTITION", "NAME", "USER", "ST", "TIME", "NODES", "NODELIST(REASON)"}}
	for i := range 10_000 {
		p.Queue = append(p.Queue, QueueRow{Ref: fmt.Sprint(i + 1), ID: fmt.Sprint(i + 1),
			Rest: []string{"batch", "<b>sim</b>", fmt.Sprintf("u%02d", i%50), "PD", "0:00", "1", "(Priority)"}})
	}
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		if err := Overview(&buf, p); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len()), "bytes")
}
