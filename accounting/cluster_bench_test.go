package accounting

import (
	"fmt"
	"testing"
	"time"
)

// The reports that spread usage over time, over the shared store of
// benchRecords records (one ending every 30 s, about a year):
//
//	ACCT_BENCH_DIR=/tmp/acct go test ./accounting -run XXX -bench 'Cluster|Series' -benchtime 5x

// benchFacts are the node facts of 40 nodes of 64 CPUs over the shared
// history: each drained for a day a month, down for an hour a week.
func benchFacts() []NodeFact {
	var out []NodeFact
	span := time.Duration(benchRecords()) * benchStep
	for n := range 40 {
		name := fmt.Sprintf("node%02d", n)
		out = append(out, NodeFact{Node: name, At: t0.Add(-time.Hour), State: NodeUp, CPUs: 64})
		for at := time.Duration(n) * time.Hour; at < span; at += 7 * 24 * time.Hour {
			out = append(out, NodeFact{Node: name, At: t0.Add(at), State: NodeDown, CPUs: 64},
				NodeFact{Node: name, At: t0.Add(at + time.Hour), State: NodeUp, CPUs: 64})
		}
		for at := time.Duration(n) * 6 * time.Hour; at < span; at += 30 * 24 * time.Hour {
			out = append(out, NodeFact{Node: name, At: t0.Add(at + 2*time.Hour), State: NodePlannedDown, CPUs: 64},
				NodeFact{Node: name, At: t0.Add(at + 26*time.Hour), State: NodeUp, CPUs: 64})
		}
	}
	return out
}

// clusterReport is corral acct report cluster over [start, end), as the
// controller computes it: node facts, then every run in the window.
func clusterReport(b *testing.B, s *Store, start, end time.Time) int {
	facts, err := s.NodeFacts()
	if err != nil {
		b.Fatal(err)
	}
	u := NewUtilization(start, end)
	u.AddNodes(facts)
	runs := 0
	if err := s.EachRun(start, end, func(r *Run) error { u.AddRun(r); runs++; return nil }); err != nil {
		b.Fatal(err)
	}
	_ = u.Result()
	return runs
}

func benchFactStore(b *testing.B) *Store {
	s := sharedStore(b)
	if err := s.Write(Written{Nodes: benchFacts()}); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkClusterUtilizationYear is the cluster report over the whole
// history (every record's run read from the run index).
func BenchmarkClusterUtilizationYear(b *testing.B) {
	s := benchFactStore(b)
	end := t0.Add(time.Duration(benchRecords()) * benchStep)
	var runs int
	for b.Loop() {
		runs = clusterReport(b, s, t0, end)
	}
	b.ReportMetric(float64(runs), "runs")
}

// BenchmarkClusterUtilizationDay is the report's default window, a day,
// in the middle of the history.
func BenchmarkClusterUtilizationDay(b *testing.B) {
	s := benchFactStore(b)
	start := t0.Add(time.Duration(benchRecords()) * benchStep / 2)
	var runs int
	for b.Loop() {
		runs = clusterReport(b, s, start, start.Add(24*time.Hour))
	}
	b.ReportMetric(float64(runs), "runs")
}

// BenchmarkSeriesYear is the --svg data of the whole history (weekly
// bins); BenchmarkSeriesWeek the status page's default week (3 h bins).
func BenchmarkSeriesYear(b *testing.B) {
	benchSeries(b, t0, t0.Add(time.Duration(benchRecords())*benchStep))
}

func BenchmarkSeriesWeek(b *testing.B) {
	start := t0.Add(time.Duration(benchRecords()) * benchStep / 2)
	benchSeries(b, start, start.Add(7*24*time.Hour))
}

func benchSeries(b *testing.B, start, end time.Time) {
	s := sharedStore(b)
	var runs int
	for b.Loop() {
		ser := NewSeries(start, end, SeriesStep(start, end))
		runs = 0
		if err := s.EachRun(start, end, func(r *Run) error { ser.AddRun(r); runs++; return nil }); err != nil {
			b.Fatal(err)
		}
		_ = ser.Result()
	}
	b.ReportMetric(float64(runs), "runs")
}
