package display

import (
	"encoding/json"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"

	"corral/api"
)

// AcctJSON writes records as `sacct --json` does: {"jobs": [...]}, each
// job with Slurm's key names for the fields corral records (times as Unix
// seconds, the time limit in minutes, TRES as lists of type/name/count),
// and its batch step under "steps".
func AcctJSON(w io.Writer, recs []api.AcctRecord, env AcctEnv) error {
	jobs := make([]acctJSONJob, 0, len(recs))
	for i := range recs {
		jobs = append(jobs, acctJob(&recs[i], &env))
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{"jobs": jobs})
}

type acctJSONNumber struct {
	Set      bool  `json:"set"`
	Infinite bool  `json:"infinite"`
	Number   int64 `json:"number"`
}

type acctJSONTRES struct {
	Type  string `json:"type"`
	Name  string `json:"name"`
	Count int64  `json:"count"`
}

type acctJSONTime struct {
	Submission int64          `json:"submission"`
	Eligible   int64          `json:"eligible"`
	Start      int64          `json:"start"`
	End        int64          `json:"end"`
	Elapsed    int64          `json:"elapsed"`
	Limit      acctJSONNumber `json:"limit"`
	Total      acctJSONSecs   `json:"total"`
}

type acctJSONSecs struct {
	Seconds      int64 `json:"seconds"`
	Microseconds int64 `json:"microseconds"`
}

type acctJSONState struct {
	Current []string `json:"current"`
	Reason  string   `json:"reason"`
}

type acctJSONExit struct {
	Status     []string       `json:"status"`
	ReturnCode acctJSONNumber `json:"return_code"`
	Signal     struct {
		ID acctJSONNumber `json:"id"`
	} `json:"signal"`
}

type acctJSONStep struct {
	Step struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"step"`
	State    []string     `json:"state"`
	ExitCode acctJSONExit `json:"exit_code"`
	Nodes    struct {
		Count int      `json:"count"`
		List  []string `json:"list"`
	} `json:"nodes"`
	Time       acctJSONTime `json:"time"`
	Statistics struct {
		MaxRSSKB int64 `json:"max_rss_kb"`
	} `json:"statistics"`
	TRES struct {
		Allocated []acctJSONTRES `json:"allocated"`
	} `json:"tres"`
}

type acctJSONJob struct {
	JobID   uint64 `json:"job_id"`
	AllocID uint64 `json:"allocation_id"`
	Array   struct {
		JobID uint64         `json:"job_id"`
		Task  acctJSONNumber `json:"task_id"`
	} `json:"array"`
	Name      string        `json:"name"`
	User      string        `json:"user"`
	Group     string        `json:"group"`
	Account   string        `json:"account"`
	Tenant    string        `json:"tenant"`
	Partition string        `json:"partition"`
	QOS       string        `json:"qos"`
	Cluster   string        `json:"cluster"`
	State     acctJSONState `json:"state"`
	ExitCode  acctJSONExit  `json:"exit_code"`
	Time      acctJSONTime  `json:"time"`
	Nodes     string        `json:"nodes"`
	Restarts  int           `json:"restart_cnt"`
	WorkDir   string        `json:"working_directory"`
	TRES      struct {
		Requested []acctJSONTRES `json:"requested"`
		Allocated []acctJSONTRES `json:"allocated"`
	} `json:"tres"`
	Billing float64        `json:"billing"`
	Steps   []acctJSONStep `json:"steps"`
}

func acctJob(r *api.AcctRecord, env *AcctEnv) acctJSONJob {
	j := acctJSONJob{
		JobID: r.JobID, AllocID: r.AllocID, Name: r.Name, User: r.User, Account: r.Account, Tenant: r.Tenant,
		Partition: r.Partition, QOS: r.QOS, Cluster: env.Cluster, Restarts: r.Restarts, WorkDir: r.WorkDir,
		State: acctJSONState{Current: []string{string(r.State)}, Reason: "None"}, ExitCode: acctExit(r),
		Time: acctTimes(r), Nodes: r.NodeList, Billing: r.Billing, Steps: []acctJSONStep{},
	}
	if r.Reason != "" {
		j.State.Reason = r.Reason
	}
	if env.UID != nil {
		_, _, j.Group, _ = env.UID(r.User)
	}
	if r.ArrayJobID != 0 {
		j.Array.JobID = r.ArrayJobID
		j.Array.Task = acctJSONNumber{Set: true, Number: int64(r.ArrayTaskID)}
	}
	j.TRES.Requested, j.TRES.Allocated = tresList(r.ReqTRES, 0), tresList(r.AllocTRES, r.BillingRate)
	if r.AllocID != 0 {
		var s acctJSONStep
		s.Step.ID, s.Step.Name = strconv.FormatUint(r.JobID, 10)+".batch", "batch"
		s.State, s.ExitCode, s.Time = []string{string(r.State)}, j.ExitCode, j.Time
		s.Nodes.Count, s.Nodes.List = 1, []string{r.NodeList}
		s.Statistics.MaxRSSKB = r.MaxRSSKB
		s.TRES.Allocated = j.TRES.Allocated
		if b := batchRecord(r); b != r {
			// A multi-node run's batch script runs on its rank 0 alone.
			s.Nodes.List, s.TRES.Allocated = []string{b.NodeList}, tresList(b.AllocTRES, 0)
		}
		j.Steps = append(j.Steps, s)
		for i := range r.Steps {
			st := stepRecord(r, &r.Steps[i])
			var s acctJSONStep
			s.Step.ID, s.Step.Name = strconv.FormatUint(r.JobID, 10)+"."+strconv.Itoa(r.Steps[i].ID), st.Name
			s.State, s.ExitCode, s.Time = []string{string(st.State)}, acctExit(st), acctTimes(st)
			s.Time.Limit = acctJSONNumber{}
			s.Nodes.Count, s.Nodes.List = st.AllocTRES.Nodes, []string{st.NodeList}
			s.TRES.Allocated = tresList(st.AllocTRES, 0)
			j.Steps = append(j.Steps, s)
		}
	}
	return j
}

func acctExit(r *api.AcctRecord) acctJSONExit {
	var e acctJSONExit
	switch {
	case r.Signal != 0:
		e.Status = []string{"SIGNALED"}
	case r.ExitCode != 0:
		e.Status = []string{"ERROR"}
	default:
		e.Status = []string{"SUCCESS"}
	}
	e.ReturnCode = acctJSONNumber{Set: true, Number: int64(r.ExitCode)}
	e.Signal.ID = acctJSONNumber{Set: r.Signal != 0, Number: int64(r.Signal)}
	return e
}

func acctTimes(r *api.AcctRecord) acctJSONTime {
	unix := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.Unix()
	}
	t := acctJSONTime{Submission: unix(r.Submit), Eligible: unix(r.Eligible), Start: unix(r.Start), End: unix(r.End), Elapsed: r.Elapsed}
	if r.TimeLimit > 0 {
		t.Limit = acctJSONNumber{Set: true, Number: (r.TimeLimit + 59) / 60}
	} else {
		t.Limit = acctJSONNumber{Set: true, Infinite: true}
	}
	t.Total.Seconds = int64(r.TotalCPU)
	t.Total.Microseconds = int64((r.TotalCPU - float64(int64(r.TotalCPU))) * 1e6)
	return t
}

// tresList is a TRES set as sacct --json lists it.
func tresList(t api.TRES, billing float64) []acctJSONTRES {
	out := []acctJSONTRES{}
	if billing > 0 {
		out = append(out, acctJSONTRES{Type: "billing", Count: int64(billing + 0.5)})
	}
	if t.CPU > 0 {
		out = append(out, acctJSONTRES{Type: "cpu", Count: int64(t.CPU)})
	}
	if t.MemMB > 0 {
		out = append(out, acctJSONTRES{Type: "mem", Count: t.MemMB})
	}
	if t.Nodes > 0 {
		out = append(out, acctJSONTRES{Type: "node", Count: int64(t.Nodes)})
	}
	for _, typ := range slices.Sorted(maps.Keys(t.GPUs)) {
		name := "gpu"
		if typ != "" {
			name += ":" + typ
		}
		out = append(out, acctJSONTRES{Type: "gres", Name: name, Count: int64(t.GPUs[typ])})
	}
	return out
}
