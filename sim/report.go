package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"corral/ctld/sched"
)

// Result is the outcome of a simulation. Times are in seconds.
type Result struct {
	// Trace is the trace's Name.
	Trace  string
	Policy sched.Policy
	// Procs is the machine's processor count.
	Procs int
	// Jobs counts the jobs simulated; Skipped those left out.
	Jobs    int
	Skipped Skipped
	// Timeouts counts the jobs killed at their time limit; Preempted the
	// jobs preemption ended (mode cancel) and Requeued the runs it put
	// back in the queue (mode requeue).
	Timeouts    int
	Preempted   int
	Requeued    int
	MeanWait    float64
	MedianWait  float64
	MeanBSLD    float64
	P95BSLD     float64
	Utilization float64
	// Makespan is the last end minus the first submit.
	Makespan int64
	// Passes counts the calls to sched.Schedule; IdlePasses the passes
	// left out because no pending job fitted in any node's free CPUs (they
	// would have started nothing).
	Passes     int
	IdlePasses int
	// Wall is how long the simulation took on this machine (with
	// RunSWF, the reading of the trace that it overlaps included).
	Wall time.Duration
	// Outcomes hold every simulated job in queue order.
	Outcomes []Outcome
	// With a cluster: the placed jobs' mean placement score and the share
	// of them on a single NUMA node.
	Placed          int
	MeanScore       float64
	SingleNUMAShare float64
}

// Skipped counts the trace's jobs a simulation leaves out, by cause.
type Skipped struct {
	// NoSize: neither requested nor allocated processors.
	NoSize int `json:"no_processors"`
	// NoRunTime: a negative (unknown) run time.
	NoRunTime int `json:"no_run_time"`
	// TooLarge: more processors than the machine has.
	TooLarge int `json:"too_large"`
}

// Total returns the number of jobs skipped.
func (s Skipped) Total() int { return s.NoSize + s.NoRunTime + s.TooLarge }

func (s Skipped) String() string {
	var parts []string
	for _, c := range []struct {
		n    int
		what string
	}{{s.NoSize, "without a processor count"}, {s.NoRunTime, "without a run time"}, {s.TooLarge, "larger than the machine"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	return strings.Join(parts, ", ")
}

// Outcome is one simulated job. Times are trace seconds (the submit field's
// clock).
type Outcome struct {
	ID     uint64
	Size   int
	Submit int64
	Start  int64
	// End is when the job ended or was killed at its time limit.
	End int64
	// With a cluster: whether the job got a placement inside its node
	// (Placed, below), its score (100: all on one NUMA node), and whether
	// it spans one NUMA node.
	Score int
	// Restarts counts the runs preemption requeued; Preempted is set when
	// preemption ended the job (mode cancel).
	Restarts int
	// The flags are last, together: 64 bytes a job rather than 80 (the
	// simulation holds one per job of the trace).
	TimedOut   bool
	Placed     bool
	SingleNUMA bool
	Preempted  bool
}

// Wait returns the seconds from submit to start.
func (o Outcome) Wait() int64 { return o.Start - o.Submit }

// Run returns the seconds the job ran.
func (o Outcome) Run() int64 { return o.End - o.Start }

// bsldFloor is the run time below which bounded slowdown stops growing, so
// that very short jobs do not dominate it.
const bsldFloor = 10

// BSLD returns the job's bounded slowdown: max(1, (wait+run) / max(run, 10)).
func (o Outcome) BSLD() float64 {
	return max(1, float64(o.Wait()+o.Run())/float64(max(o.Run(), bsldFloor)))
}

// summarize computes a Result's metrics from the jobs of a finished run,
// which are in queue order, and their outcomes when asked.
func summarize(jobs *jobList, procs int, outcomes bool) Result {
	n := jobs.len()
	res := Result{Procs: procs, Jobs: n}
	if outcomes {
		res.Outcomes = make([]Outcome, n)
	}
	if n == 0 {
		return res
	}
	waits := make([]float64, n)
	bslds := make([]float64, n)
	var work, waitSum, bsldSum float64
	first, last := jobs.at(0).out.Submit, jobs.at(0).out.End
	for i := range n {
		o := jobs.at(i).out
		if outcomes {
			res.Outcomes[i] = o
		}
		if o.TimedOut && !o.Preempted {
			res.Timeouts++
		}
		if o.Preempted {
			res.Preempted++
		}
		res.Requeued += o.Restarts
		waits[i], bslds[i] = float64(o.Wait()), o.BSLD()
		waitSum += waits[i]
		bsldSum += bslds[i]
		work += float64(o.Size) * float64(o.Run())
		last = max(last, o.End)
		if o.Placed {
			res.Placed++
			res.MeanScore += float64(o.Score)
			if o.SingleNUMA {
				res.SingleNUMAShare++
			}
		}
	}
	if res.Placed > 0 {
		res.MeanScore /= float64(res.Placed)
		res.SingleNUMAShare /= float64(res.Placed)
	}
	res.MeanWait, res.MeanBSLD = waitSum/float64(n), bsldSum/float64(n)
	// Order statistics by selection: sorting both lists cost more.
	upper := nth(waits, n/2)
	lower := upper
	if n%2 == 0 {
		lower = slices.Max(waits[:n/2]) // the n/2 smallest are before it
	}
	res.MedianWait = (lower + upper) / 2
	res.P95BSLD = nth(bslds, int(math.Ceil(0.95*float64(n)))-1)
	res.Makespan = last - first
	if res.Makespan > 0 {
		res.Utilization = work / (float64(procs) * float64(res.Makespan))
	}
	return res
}

// WriteText prints a result for people, one labelled line per figure.
func WriteText(w io.Writer, r Result) error {
	var b strings.Builder
	row := func(label, format string, args ...any) {
		fmt.Fprintf(&b, "%-12s %s\n", label, fmt.Sprintf(format, args...))
	}
	if r.Trace != "" {
		row("trace", "%s", r.Trace)
	}
	row("policy", "%s", r.Policy)
	row("machine", "%d processors", r.Procs)
	row("jobs", "%d simulated, %d killed at their time limit", r.Jobs, r.Timeouts)
	if r.Skipped.Total() > 0 {
		row("skipped", "%d (%s)", r.Skipped.Total(), r.Skipped)
	}
	if r.Preempted > 0 || r.Requeued > 0 {
		row("preemption", "%d jobs ended by it, %d runs requeued", r.Preempted, r.Requeued)
	}
	row("wait", "mean %s, median %s", seconds(r.MeanWait), seconds(r.MedianWait))
	row("slowdown", "mean %.2f, p95 %.2f (bounded: runs under %d s count as %d s)", r.MeanBSLD, r.P95BSLD, bsldFloor, bsldFloor)
	row("utilization", "%.3f", r.Utilization)
	row("makespan", "%s", seconds(float64(r.Makespan)))
	if r.Placed > 0 {
		row("placement", "%d jobs placed inside their node: mean score %.1f, %.1f %% on one NUMA node", r.Placed, r.MeanScore, 100*r.SingleNUMAShare)
	}
	row("passes", "%d (and %d left out: no pending job fitted in the free CPUs)", r.Passes, r.IdlePasses)
	row("wall time", "%s", r.Wall.Round(time.Millisecond))
	_, err := io.WriteString(w, b.String())
	return err
}

// seconds renders a duration in seconds, with a larger unit for long ones.
func seconds(v float64) string {
	s := fmt.Sprintf("%.1f s", v)
	if v == math.Trunc(v) {
		s = fmt.Sprintf("%.0f s", v)
	}
	switch {
	case v >= 86400:
		return fmt.Sprintf("%s (%.1f days)", s, v/86400)
	case v >= 3600:
		return fmt.Sprintf("%s (%.1f h)", s, v/3600)
	case v >= 60:
		return fmt.Sprintf("%s (%.1f min)", s, v/60)
	}
	return s
}

// resultJSON is the JSON form of a Result, without the per-job outcomes.
type resultJSON struct {
	Trace       string  `json:"trace,omitempty"`
	Policy      string  `json:"policy"`
	Processors  int     `json:"processors"`
	Jobs        int     `json:"jobs"`
	Skipped     Skipped `json:"skipped"`
	Timeouts    int     `json:"timeouts"`
	Preempted   int     `json:"preempted,omitempty"`
	Requeued    int     `json:"requeued,omitempty"`
	MeanWait    float64 `json:"mean_wait_s"`
	MedianWait  float64 `json:"median_wait_s"`
	MeanBSLD    float64 `json:"mean_bsld"`
	P95BSLD     float64 `json:"p95_bsld"`
	Utilization float64 `json:"utilization"`
	Makespan    int64   `json:"makespan_s"`
	Passes      int     `json:"passes"`
	IdlePasses  int     `json:"idle_passes"`
	Wall        float64 `json:"wall_s"`
	Placed      int     `json:"placed,omitempty"`
	MeanScore   float64 `json:"mean_placement_score,omitempty"`
	SingleNUMA  float64 `json:"single_numa_share,omitempty"`
}

// WriteJSON prints a result's figures as one indented JSON object; the
// per-job outcomes are left out.
func WriteJSON(w io.Writer, r Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(resultJSON{
		Trace: r.Trace, Policy: string(r.Policy), Processors: r.Procs, Jobs: r.Jobs,
		Skipped: r.Skipped, Timeouts: r.Timeouts, Preempted: r.Preempted, Requeued: r.Requeued, MeanWait: r.MeanWait, MedianWait: r.MedianWait,
		MeanBSLD: r.MeanBSLD, P95BSLD: r.P95BSLD, Utilization: r.Utilization,
		Makespan: r.Makespan, Passes: r.Passes, IdlePasses: r.IdlePasses, Wall: r.Wall.Seconds(),
		Placed: r.Placed, MeanScore: r.MeanScore, SingleNUMA: r.SingleNUMAShare,
	})
}

// nth returns the k-th smallest of a (counted from 0), which holds no NaN,
// reordering a so that none before index k is larger and none after it
// smaller (quickselect with a three-way partition, as many values repeat:
// most waits are 0).
func nth(a []float64, k int) float64 {
	lo, hi := 0, len(a)
	for hi-lo > 16 {
		x, y, z := a[lo], a[lo+(hi-lo)/2], a[hi-1]
		p := max(min(x, y), min(max(x, y), z)) // the median of three
		lt, i, gt := lo, lo, hi
		for i < gt {
			switch {
			case a[i] < p:
				a[lt], a[i] = a[i], a[lt]
				lt++
				i++
			case a[i] > p:
				gt--
				a[i], a[gt] = a[gt], a[i]
			default:
				i++
			}
		}
		switch {
		case k < lt:
			hi = lt
		case k >= gt:
			lo = gt
		default:
			return p
		}
	}
	slices.Sort(a[lo:hi])
	return a[k]
}
