package ctld

import (
	"github.com/prometheus/client_golang/prometheus"

	"corral/api"
	"corral/ctld/state"
	"corral/migrate"
)

// The live migration figures (docs/metrics.md): the downtime, stream time
// and bytes of each migration whose destination continued, observed by the
// member that committed the destination's report (the leader), and, from
// the state at scrape time, the migrations held by phase.

// migrationBuckets span a downtime of a millisecond to a stream of
// minutes.
var migrationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// migrationMetrics are the member's own migration figures.
type migrationMetrics struct {
	downtime, total prometheus.Histogram
	bytes           prometheus.Counter
}

func newMigrationMetrics() migrationMetrics {
	return migrationMetrics{
		downtime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "corral_migration_downtime_seconds",
			Help: "How long migrated guests stood still: their vCPUs stopped at the source until the destination continued them.", Buckets: migrationBuckets}),
		total: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "corral_migration_duration_seconds",
			Help: "How long live migrations' streams took, start to completion at the source.", Buckets: migrationBuckets}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_migration_bytes_total",
			Help: "Guest memory live migrations sent, in bytes."}),
	}
}

func (m migrationMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.downtime, m.total, m.bytes}
}

// observeMigrations observes the migrations whose destination's resumed
// report changed them: those are complete, their figures known.
func (m *metrics) observeMigrations(c *Controller, reps []api.MigrationReport, changed []uint64) {
	done := map[uint64]bool{}
	for _, id := range changed {
		done[id] = true
	}
	c.fsm.Read(func(s *state.State) {
		for _, r := range reps {
			mig := s.Migrations[r.Migration]
			if r.Event != string(migrate.EvResumed) || !done[r.Migration] || mig == nil {
				continue
			}
			m.migration.downtime.Observe(float64(mig.Stats.DowntimeMS()) / 1000)
			m.migration.total.Observe(float64(mig.Stats.TotalMS) / 1000)
			m.migration.bytes.Add(float64(mig.Stats.Bytes))
		}
	})
}

var descMigrations = desc("corral_migrations", "Live migrations the state holds, by phase (ended ones stay with their jobs until those are purged).", "phase")

// collectMigrations counts the state's migrations by phase.
func (sc *stateCollector) collectMigrations(ch chan<- prometheus.Metric) {
	counts := map[migrate.Phase]int{}
	sc.c.fsm.Read(func(s *state.State) {
		for _, m := range s.Migrations {
			counts[m.Phase]++
		}
	})
	for _, p := range []migrate.Phase{migrate.Requested, migrate.Placed, migrate.Prepared, migrate.Streaming,
		migrate.SwitchOver, migrate.Released, migrate.Aborted} {
		gauge(ch, descMigrations, float64(counts[p]), string(p))
	}
}
