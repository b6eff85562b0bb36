package accounting

import (
	"slices"
	"strings"
	"time"

	"corral/api"
)

// Series sums usage over time, by account, in fixed bins, and the waits
// of the jobs that started in the window: the data `corral acct report
// --svg` and the status page draw. Feed it with AddRun, then read Result.
type Series struct {
	start, end time.Time
	step       time.Duration
	bins       int
	accounts   map[string]*api.AcctSeriesLine
	waits      []api.WaitBucket
	// counted holds the jobs whose wait is counted (a job of several
	// nodes has a run, and a record, per node), 64 ids a word: a year's
	// million jobs are a few thousand words, not a million map entries.
	counted map[uint64]uint64
}

// WaitBuckets are the bounds of the wait-time distribution, in seconds.
var WaitBuckets = []struct {
	To    time.Duration
	Label string
}{
	{time.Minute, "< 1 min"},
	{10 * time.Minute, "1-10 min"},
	{time.Hour, "10-60 min"},
	{6 * time.Hour, "1-6 h"},
	{24 * time.Hour, "6-24 h"},
	{7 * 24 * time.Hour, "1-7 d"},
	{0, "> 7 d"},
}

// SeriesStep picks the bin for a window: the shortest of an hour, 3 h,
// 6 h, 12 h, a day or a week that cuts it into at most 60 bins (else 30
// days).
func SeriesStep(start, end time.Time) time.Duration {
	for _, h := range []time.Duration{1, 3, 6, 12, 24, 7 * 24} {
		if end.Sub(start) <= 60*h*time.Hour {
			return h * time.Hour
		}
	}
	return 30 * 24 * time.Hour
}

// MaxSeriesBins bounds a series' bins, so that a tiny step over a long
// window cannot make an answer of millions of numbers.
const MaxSeriesBins = 2000

// NewSeries starts a series of [start, end) in bins of step; the caller
// checks that step cuts it into at most MaxSeriesBins.
func NewSeries(start, end time.Time, step time.Duration) *Series {
	s := &Series{start: start, end: end, step: step, accounts: map[string]*api.AcctSeriesLine{}, counted: map[uint64]uint64{}}
	s.bins = int((end.Sub(start) + step - 1) / step)
	var from time.Duration
	for _, b := range WaitBuckets {
		s.waits = append(s.waits, api.WaitBucket{From: int64(from / time.Second), To: int64(b.To / time.Second), Label: b.Label})
		from = b.To
	}
	return s
}

// line returns account's line, made on first use.
func (s *Series) line(account string) *api.AcctSeriesLine {
	l := s.accounts[account]
	if l == nil {
		l = &api.AcctSeriesLine{Account: account, CPUSeconds: make([]float64, s.bins),
			GPUSeconds: make([]float64, s.bins), Billing: make([]float64, s.bins)}
		s.accounts[account] = l
	}
	return l
}

// AddRun spreads a run's totals over the bins its run time falls in, and
// counts its job's wait when it started in the window.
func (s *Series) AddRun(r *Run) {
	if !r.Start.IsZero() && r.End.After(r.Start) && s.bins > 0 {
		run := r.End.Sub(r.Start).Seconds()
		first := max(0, int(r.Start.Sub(s.start)/s.step))
		last := min(s.bins-1, int(r.End.Sub(s.start)/s.step))
		var l *api.AcctSeriesLine
		for b := first; b <= last; b++ {
			from := s.start.Add(time.Duration(b) * s.step)
			to := from.Add(s.step)
			if to.After(s.end) {
				to = s.end
			}
			share := overlapSeconds(r.Start, r.End, from, to) / run
			if share == 0 {
				continue
			}
			if l == nil {
				l = s.line(r.Account)
			}
			l.CPUSeconds[b] += share * r.CPUSeconds
			l.GPUSeconds[b] += share * r.GPUSeconds
			l.Billing[b] += share * r.Billing
		}
	}
	if r.First && !r.Start.IsZero() && !r.Start.Before(s.start) && r.Start.Before(s.end) && s.count(r.Job) {
		wait := max(0, r.Start.Sub(r.Eligible))
		for i, b := range WaitBuckets {
			if b.To == 0 || wait < b.To {
				s.waits[i].Jobs++
				break
			}
		}
	}
}

// count reports whether job's wait is not counted yet, and marks it.
func (s *Series) count(job uint64) bool {
	word, bit := job>>6, uint64(1)<<(job&63)
	if s.counted[word]&bit != 0 {
		return false
	}
	s.counted[word] |= bit
	return true
}

// Result returns the series, its accounts by name ("" for jobs charged to
// none).
func (s *Series) Result() api.AcctSeries {
	out := api.AcctSeries{Start: s.start, End: s.end, Step: int64(s.step / time.Second), Waits: s.waits,
		Accounts: []api.AcctSeriesLine{}}
	for _, l := range s.accounts {
		out.Accounts = append(out.Accounts, *l)
	}
	slices.SortFunc(out.Accounts, func(a, b api.AcctSeriesLine) int { return strings.Compare(a.Account, b.Account) })
	return out
}
