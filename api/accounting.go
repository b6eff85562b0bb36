package api

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// AcctRecord is the accounting record of one run (allocation) of a job, or
// of a job that ended without a run (cancelled while pending): what
// `corral acct` (sacct) prints. Every controller writes the same record
// from the Raft log when the run or the job ends (package accounting).
type AcctRecord struct {
	JobID uint64 `json:"job_id"`
	// Ref is how users name the job: "12", "12_5" for task 5 of array
	// 12, "12_[3-9]" for an array's tasks that never started.
	Ref string `json:"ref"`
	// ArrayJobID and ArrayTaskID name an array task (ArrayJobID is 0
	// for a job that is not one).
	ArrayJobID  uint64 `json:"array_job_id,omitempty"`
	ArrayTaskID int    `json:"array_task_id,omitempty"`
	// AllocID is the run's allocation; 0 for a job that never ran in
	// the end that this record tells of.
	AllocID uint64 `json:"alloc_id"`
	// Final is set on the record of a job's last run (or of its end
	// without one); a requeued or migrated run's record has it unset.
	Final bool `json:"final,omitempty"`

	Name      string `json:"name"`
	User      string `json:"user"`
	Tenant    string `json:"tenant,omitempty"`
	Account   string `json:"account,omitempty"`
	Partition string `json:"partition,omitempty"`
	QOS       string `json:"qos,omitempty"`
	WorkDir   string `json:"work_dir,omitempty"`

	Submit   time.Time `json:"submit"`
	Eligible time.Time `json:"eligible"`
	Start    time.Time `json:"start,omitzero"`
	End      time.Time `json:"end"`
	// TimeLimit is in seconds (0: none); Elapsed is the run's time in
	// seconds, suspensions left out.
	TimeLimit int64 `json:"time_limit_s,omitempty"`
	Elapsed   int64 `json:"elapsed_s"`

	State    JobState `json:"state"`
	ExitCode int      `json:"exit_code"`
	Signal   int      `json:"signal,omitempty"`
	Reason   string   `json:"reason,omitempty"`
	Message  string   `json:"message,omitempty"`
	NodeList string   `json:"node_list,omitempty"`

	ReqTRES   TRES `json:"req_tres"`
	AllocTRES TRES `json:"alloc_tres"`
	// TRESSeconds is AllocTRES times Elapsed: CPU-seconds, MiB-seconds,
	// GPU-seconds. BillingRate is the run's billing per second as the
	// scheduler's billing weights price its TRES; Billing is
	// BillingRate times Elapsed.
	CPUSeconds  float64 `json:"cpu_s"`
	MemSeconds  float64 `json:"mem_mb_s,omitempty"`
	GPUSeconds  float64 `json:"gpu_s,omitempty"`
	BillingRate float64 `json:"billing_rate"`
	Billing     float64 `json:"billing"`

	// Restarts counts the job's earlier runs (requeues) at this record's
	// end; Preemptions the runs of the job preempted so far.
	Restarts    int `json:"restarts,omitempty"`
	Preemptions int `json:"preemptions,omitempty"`

	// TotalCPU (seconds) and MaxRSSKB are what the node measured of the
	// run; 0 when it measured nothing.
	TotalCPU float64 `json:"total_cpu_s,omitempty"`
	MaxRSSKB int64   `json:"max_rss_kb,omitempty"`

	// BatchNode and BatchTRES, set for a run on several nodes, are the
	// node that ran the batch script (rank 0, not necessarily the first
	// of NodeList) and what that node held: sacct's JOB.batch line.
	BatchNode string `json:"batch_node,omitempty"`
	BatchTRES TRES   `json:"batch_tres,omitzero"`

	// Steps are the run's steps (srun), in id order: sacct's 12.0, 12.1
	// lines under the job's. A run keeps its newest 128 ended steps.
	Steps []AcctStep `json:"steps,omitempty"`
}

// AcctStep is the accounting of one step of a run: what it ran, on which
// nodes, with how many tasks, and how it ended (the worst task's exit
// code or signal).
type AcctStep struct {
	ID       int       `json:"id"`
	Name     string    `json:"name"`
	NodeList string    `json:"node_list"`
	Nodes    int       `json:"nodes"`
	NTasks   int       `json:"ntasks"`
	CPUs     int       `json:"cpus"`
	State    JobState  `json:"state"`
	ExitCode int       `json:"exit_code"`
	Signal   int       `json:"signal,omitempty"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
}

// TRES is a set of trackable resources: CPUs, memory (MiB), GPUs by type
// ("" for untyped), nodes, hugepages (pages by size in KiB) and VFs.
type TRES struct {
	CPU       int              `json:"cpu"`
	MemMB     int64            `json:"mem_mb"`
	GPUs      map[string]int   `json:"gpus,omitempty"`
	Nodes     int              `json:"nodes"`
	Hugepages map[string]int64 `json:"hugepages,omitempty"`
	VFs       int              `json:"vfs,omitempty"`
}

// GPUCount returns the GPUs of every type.
func (t TRES) GPUCount() int {
	n := 0
	for _, c := range t.GPUs {
		n += c
	}
	return n
}

// AcctQuery selects accounting records (GET /v1/accounting/jobs).
type AcctQuery struct {
	// Jobs are job ids (an array's id selects its tasks too); empty: any.
	Jobs []uint64
	// Users and Accounts restrict to those users and accounts; AllUsers
	// asks for every user's records (sacct -a), which only a viewer who
	// may see them gets.
	Users    []string
	Accounts []string
	// Tenants restricts to the accounts under these tenants.
	Tenants  []string
	AllUsers bool
	// States keeps records in these states; empty: any.
	States []JobState
	// Start and End bound the window: a record is in it when its run
	// overlaps [Start, End] (zero End: now).
	Start, End time.Time
	// Duplicates keeps every run of a job (sacct -D), not only its last.
	Duplicates bool
}

// Values encodes q as URL query parameters.
func (q AcctQuery) Values() url.Values {
	v := url.Values{}
	for _, j := range q.Jobs {
		v.Add("job", strconv.FormatUint(j, 10))
	}
	for _, u := range q.Users {
		v.Add("user", u)
	}
	for _, a := range q.Accounts {
		v.Add("account", a)
	}
	for _, t := range q.Tenants {
		v.Add("tenant", t)
	}
	for _, s := range q.States {
		v.Add("state", string(s))
	}
	if q.AllUsers {
		v.Set("all", "1")
	}
	if q.Duplicates {
		v.Set("duplicates", "1")
	}
	if !q.Start.IsZero() {
		v.Set("start", q.Start.UTC().Format(time.RFC3339Nano))
	}
	if !q.End.IsZero() {
		v.Set("end", q.End.UTC().Format(time.RFC3339Nano))
	}
	return v
}

// AcctSummary is a controller's account of its own store: how many records
// it holds and an order-free digest of them, so that members can be
// compared (equal logs applied: equal summaries).
type AcctSummary struct {
	Records uint64 `json:"records"`
	Hash    string `json:"hash"`
}

// AcctUsage is one user's use of one account over a report's window
// (GET /v1/accounting/usage; corral acct report): the runs that ended in
// it, their CPU, GPU and memory time (memory in MiB-seconds) and billing.
type AcctUsage struct {
	Account    string  `json:"account"`
	User       string  `json:"user"`
	Records    int     `json:"records"`
	CPUSeconds float64 `json:"cpu_s"`
	GPUSeconds float64 `json:"gpu_s"`
	MemSeconds float64 `json:"mem_mb_s"`
	Billing    float64 `json:"billing"`
}

// AccountingUsage returns the usage by account and user of the runs that
// ended in [start, end) (zero: open), as far as the caller may see it.
func (c *Client) AccountingUsage(ctx context.Context, start, end time.Time) ([]AcctUsage, error) {
	var out []AcctUsage
	err := c.do(ctx, http.MethodGet, "/v1/accounting/usage?"+AcctQuery{Start: start, End: end}.Values().Encode(), nil, &out)
	return out, err
}

// Accounting returns the records q selects from the controller the client
// talks to (any member answers; none forwards).
func (c *Client) Accounting(ctx context.Context, q AcctQuery) ([]AcctRecord, error) {
	v := q.Values()
	// The compact listing decodes an order of magnitude faster than JSON.
	v.Set("format", "rows")
	var raw []byte
	if err := c.do(ctx, http.MethodGet, "/v1/accounting/jobs?"+v.Encode(), nil, &raw); err != nil {
		return nil, err
	}
	return DecodeAcctRows(bytes.NewReader(raw))
}

// AcctRecordsTrailer is the trailer that ends a streamed export: the
// number of records it holds. Its absence means the export was cut.
const AcctRecordsTrailer = "Corral-Records"

// AccountingExport writes the records q selects to w in format (csv,
// ndjson or parquet) as the controller streams them, and returns how many
// there were.
func (c *Client) AccountingExport(ctx context.Context, q AcctQuery, format string, w io.Writer) (int, error) {
	v := q.Values()
	v.Set("format", format)
	out := &streamOut{w: w}
	if err := c.do(ctx, http.MethodGet, "/v1/accounting/jobs?"+v.Encode(), nil, out); err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(out.trailer.Get(AcctRecordsTrailer))
	if err != nil {
		return 0, fmt.Errorf("%w: the export has no record count at its end", errStreamCut)
	}
	return n, nil
}

// AccountingSummary returns the controller's AcctSummary.
func (c *Client) AccountingSummary(ctx context.Context) (AcctSummary, error) {
	var out AcctSummary
	err := c.do(ctx, http.MethodGet, "/v1/accounting/summary", nil, &out)
	return out, err
}

// ParseAcctQuery reads the URL query parameters Values writes. An error
// names the parameter and says what it takes.
func ParseAcctQuery(v url.Values) (AcctQuery, error) {
	var q AcctQuery
	for _, s := range v["job"] {
		id, err := strconv.ParseUint(s, 10, 64)
		if err != nil || id == 0 {
			return q, fmt.Errorf("job=%q: give a job id, a number from 1", s)
		}
		q.Jobs = append(q.Jobs, id)
	}
	for _, s := range v["state"] {
		st, err := ParseJobState(s)
		if err != nil {
			return q, fmt.Errorf("state=%q: %v", s, err)
		}
		q.States = append(q.States, st)
	}
	for _, name := range []string{"user", "account", "tenant"} {
		for _, s := range v[name] {
			if s == "" || strings.ContainsAny(s, "\x00\n") {
				return q, fmt.Errorf("%s=%q: give a name without control characters", name, s)
			}
		}
	}
	q.Users, q.Accounts, q.Tenants = v["user"], v["account"], v["tenant"]
	q.AllUsers, q.Duplicates = v.Get("all") == "1", v.Get("duplicates") == "1"
	for name, t := range map[string]*time.Time{"start": &q.Start, "end": &q.End} {
		if s := v.Get(name); s != "" {
			p, err := time.Parse(time.RFC3339, s)
			if err != nil {
				return q, fmt.Errorf("%s=%q: give a time as 2026-12-01T10:00:00Z", name, s)
			}
			*t = p
		}
	}
	return q, nil
}

// ClusterUtilization is sreport's cluster Utilization for one TRES over a
// window (GET /v1/accounting/cluster): the TRES-seconds the cluster's
// nodes reported, split into what jobs held (Allocated), what nodes that
// stopped responding or that the controllers drained lost (Down), what
// nodes a person drained lost (PlannedDown), what jobs that could have
// run waited for (Planned, formerly Reserved; at most what was left) and
// the rest (Idle). Reported is their sum; Count the TRES's average count
// over the window.
type ClusterUtilization struct {
	TRES        string  `json:"tres"`
	Count       int     `json:"count"`
	Allocated   float64 `json:"allocated_s"`
	Down        float64 `json:"down_s"`
	PlannedDown float64 `json:"planned_down_s"`
	Idle        float64 `json:"idle_s"`
	Planned     float64 `json:"planned_s"`
	Reported    float64 `json:"reported_s"`
}

// AccountingCluster returns the cluster's utilization over [start, end)
// (zero start: yesterday's midnight is the CLI's default, the server's is
// the first fact it holds; zero end: now), one row per TRES.
func (c *Client) AccountingCluster(ctx context.Context, start, end time.Time) ([]ClusterUtilization, error) {
	var out []ClusterUtilization
	err := c.do(ctx, http.MethodGet, "/v1/accounting/cluster?"+AcctQuery{Start: start, End: end}.Values().Encode(), nil, &out)
	return out, err
}

// AcctSeries is usage over time (GET /v1/accounting/series): the window
// cut into Step-long bins from Start, each account's CPU-seconds,
// GPU-seconds and billing in each bin (a run's share of a bin is the share
// of its run time the bin holds), and the distribution of the waits of the
// jobs that started in the window.
type AcctSeries struct {
	Start    time.Time        `json:"start"`
	End      time.Time        `json:"end"`
	Step     int64            `json:"step_s"`
	Accounts []AcctSeriesLine `json:"accounts"`
	Waits    []WaitBucket     `json:"waits"`
}

// AcctSeriesLine is one account's usage in each bin of an AcctSeries.
type AcctSeriesLine struct {
	Account    string    `json:"account"`
	CPUSeconds []float64 `json:"cpu_s"`
	GPUSeconds []float64 `json:"gpu_s"`
	Billing    []float64 `json:"billing"`
}

// WaitBucket counts the jobs whose wait (eligible to first start) was at
// least From and less than To seconds (To 0: no bound).
type WaitBucket struct {
	From  int64  `json:"from_s"`
	To    int64  `json:"to_s"`
	Label string `json:"label"`
	Jobs  int    `json:"jobs"`
}

// AccountingSeries returns the usage series over [start, end) in bins of
// step (0: the server picks one), as far as the caller may see it.
func (c *Client) AccountingSeries(ctx context.Context, start, end time.Time, step time.Duration) (AcctSeries, error) {
	v := AcctQuery{Start: start, End: end}.Values()
	if step > 0 {
		v.Set("step", strconv.FormatInt(int64(step/time.Second), 10))
	}
	var out AcctSeries
	err := c.do(ctx, http.MethodGet, "/v1/accounting/series?"+v.Encode(), nil, &out)
	return out, err
}
