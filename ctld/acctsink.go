package ctld

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"corral/accounting/pgsink"
)

// The optional PostgreSQL sink (ctld --accounting-postgres DSN) copies
// the accounting records into a site's database. Only the leader ships:
// the cursor (how far the database holds the records) lives in the
// database itself, and is a position in the store's change feed, which
// is the same on every member (accounting/changes.go), so a member that
// takes over leadership continues where the last one stopped, and the
// database is written once, not once per member. See package
// accounting/pgsink for why nothing is lost or written twice.

// openSink makes the sink of the member's store when cfg asks for one.
func (c *Controller) openSink() error {
	if c.cfg.AccountingPostgres == "" {
		return nil
	}
	if c.fsm.acct == nil {
		return errors.New("--accounting-postgres needs --data: the records are shipped from the member's accounting store")
	}
	opt := c.cfg.SinkOptions
	opt.LogIndex = func() uint64 { return c.node.raft.AppliedIndex() }
	s, err := pgsink.New(c.cfg.AccountingPostgres, c.fsm.acct.store, c.log.With("sink", "postgres"), opt)
	if err != nil {
		return err
	}
	c.sink = s
	c.fsm.acct.wrote = s.Wake
	c.metrics.reg.MustRegister(sinkCollector{s: s})
	return nil
}

// sinkLoop ships records while this member leads.
func (c *Controller) sinkLoop(ctx context.Context) {
	if c.sink != nil {
		_ = c.sink.Run(ctx)
	}
}

// sinkCollector publishes the sink's figures (docs/metrics.md).
type sinkCollector struct{ s *pgsink.Sink }

var (
	descSinkActive    = desc("corral_accounting_sink_active", "1 on the member that ships accounting records to PostgreSQL (the leader), else 0.")
	descSinkConnected = desc("corral_accounting_sink_connected", "1 while the shipping member holds a working PostgreSQL connection.")
	descSinkWaiting   = desc("corral_accounting_sink_waiting", "1 while the shipping member waits for its accounting store to be rebuilt from its peers before it ships.")
	descSinkPending   = desc("corral_accounting_sink_pending_records", "Records of this member's store not yet in PostgreSQL (on the shipping member).")
	descSinkRows      = desc("corral_accounting_sink_rows_total", "Records this member wrote to PostgreSQL.")
	descSinkErrors    = desc("corral_accounting_sink_errors_total", "Failures of this member's sink (each is followed by a retry).")
	descSinkLast      = desc("corral_accounting_sink_last_success_timestamp_seconds", "When this member's sink last committed records (Unix time; 0: never).")
	descSinkIndex     = desc("corral_accounting_sink_cursor_index", "The Raft index up to which PostgreSQL holds the records, as this member last confirmed it.")
)

func (sinkCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSinkActive, descSinkConnected, descSinkWaiting, descSinkPending, descSinkRows, descSinkErrors, descSinkLast, descSinkIndex} {
		ch <- d
	}
}

func (k sinkCollector) Collect(ch chan<- prometheus.Metric) {
	st := k.s.Status()
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	var pending float64
	if st.Running && st.Connected {
		// Counting the feed after the cursor reads keys only; at a
		// scrape's pace it costs little even far behind.
		if n, err := k.s.Pending(); err == nil {
			pending = float64(n)
		}
	}
	var last float64
	if !st.LastShipped.IsZero() {
		last = float64(st.LastShipped.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(descSinkActive, prometheus.GaugeValue, b(st.Running))
	ch <- prometheus.MustNewConstMetric(descSinkConnected, prometheus.GaugeValue, b(st.Connected))
	ch <- prometheus.MustNewConstMetric(descSinkWaiting, prometheus.GaugeValue, b(st.Running && st.Waiting))
	ch <- prometheus.MustNewConstMetric(descSinkPending, prometheus.GaugeValue, pending)
	ch <- prometheus.MustNewConstMetric(descSinkRows, prometheus.CounterValue, float64(st.Rows))
	ch <- prometheus.MustNewConstMetric(descSinkErrors, prometheus.CounterValue, float64(st.Errors))
	ch <- prometheus.MustNewConstMetric(descSinkLast, prometheus.GaugeValue, last)
	ch <- prometheus.MustNewConstMetric(descSinkIndex, prometheus.GaugeValue, float64(st.Cursor.Index))
}
