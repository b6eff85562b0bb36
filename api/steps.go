package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"
)

// A step is one `srun` inside a job (or an allocation): tasks launched on
// some of the nodes of the job's run. The launcher (srun) asks the
// controllers for a step (StepRequest), which they number and lay out
// over the run's nodes (Step); it then runs each task with an exec on its
// node (ExecTarget), relays their output, and reports the step's end
// (StepEnd). scancel JOB.STEP cancels it: the controllers record it and
// kill its tasks on their nodes.

// StepRequest asks for a step of a running job.
type StepRequest struct {
	// Name is the step's command (squeue -s shows it).
	Name string `json:"name"`
	// NTasks is the step's tasks (0: one per node, or NTasksPerNode on
	// each); Nodes how many of the run's nodes it uses (0: as many as the
	// tasks need, at most all); NTasksPerNode the most tasks on one.
	NTasks        int `json:"ntasks,omitempty"`
	Nodes         int `json:"nodes,omitempty"`
	NTasksPerNode int `json:"ntasks_per_node,omitempty"`
	CPUsPerTask   int `json:"cpus_per_task,omitempty"`
}

// Bounds of a step request.
const (
	MaxStepTasks   = 1_000_000
	MaxStepNameLen = 256
)

// Validate checks a step request's fields; the error names the field.
func (r *StepRequest) Validate() error {
	switch {
	case len(r.Name) > MaxStepNameLen:
		return &FieldError{Field: "name", Msg: fmt.Sprintf("the step's name is %d bytes; at most %d", len(r.Name), MaxStepNameLen)}
	case r.NTasks < 0 || r.NTasks > MaxStepTasks:
		return &FieldError{Field: "ntasks", Msg: fmt.Sprintf("-n %d: give 1 to %d tasks", r.NTasks, MaxStepTasks)}
	case r.Nodes < 0 || r.Nodes > MaxStepTasks:
		return &FieldError{Field: "nodes", Msg: fmt.Sprintf("-N %d: give a node count of 1 or more", r.Nodes)}
	case r.NTasksPerNode < 0 || r.NTasksPerNode > MaxStepTasks:
		return &FieldError{Field: "ntasks_per_node", Msg: fmt.Sprintf("--ntasks-per-node=%d: give 1 to %d", r.NTasksPerNode, MaxStepTasks)}
	case r.CPUsPerTask < 0 || r.CPUsPerTask > MaxStepTasks:
		return &FieldError{Field: "cpus_per_task", Msg: fmt.Sprintf("-c %d: give 1 or more CPUs per task", r.CPUsPerTask)}
	}
	return nil
}

// Step is a step of a job: its id, its nodes in the run's rank order with
// the tasks each runs, and (once it ended) how it ended.
type Step struct {
	Job   uint64   `json:"job"`
	ID    int      `json:"id"`
	Name  string   `json:"name"`
	Nodes []string `json:"nodes"`
	// Tasks are the tasks on each of Nodes; their sum is NTasks.
	Tasks       []int     `json:"tasks"`
	NTasks      int       `json:"ntasks"`
	CPUsPerTask int       `json:"cpus_per_task,omitempty"`
	State       JobState  `json:"state"`
	ExitCode    int       `json:"exit_code,omitempty"`
	Signal      int       `json:"signal,omitempty"`
	Start       time.Time `json:"start"`
	End         time.Time `json:"end,omitempty"`
	Message     string    `json:"message,omitempty"`
	// User and Partition are the job's, for listings.
	User      string `json:"user,omitempty"`
	Partition string `json:"partition,omitempty"`
}

// Ref is how users name the step: "12.0".
func (s *Step) Ref() string {
	return strconv.FormatUint(s.Job, 10) + "." + strconv.Itoa(s.ID)
}

// StepEnd is how a step ended, as its launcher saw it: the worst task's
// exit code, or the signal that killed it.
type StepEnd struct {
	State    JobState `json:"state"`
	ExitCode int      `json:"exit_code,omitempty"`
	Signal   int      `json:"signal,omitempty"`
}

// JobHeader names, on a request a node daemon forwards from inside a job
// (srun), the job it comes from: the controllers take the request as the
// job's owner's if the node runs the job, and refuse it for any other job.
const JobHeader = "X-Corral-Job"

// BeginStep asks for a step of running job id.
func (c *Client) BeginStep(ctx context.Context, id uint64, req StepRequest) (*Step, error) {
	var st Step
	if err := c.do(ctx, http.MethodPost, jobPath(id, "steps"), req, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// EndStep reports how step step of job id ended.
func (c *Client) EndStep(ctx context.Context, id uint64, step int, end StepEnd) error {
	return c.do(ctx, http.MethodPost, jobPath(id, "steps/"+strconv.Itoa(step)+"/end"), end, nil)
}

// CancelStep cancels step step of job id (scancel JOB.STEP).
func (c *Client) CancelStep(ctx context.Context, id uint64, step int) error {
	return c.do(ctx, http.MethodPost, jobPath(id, "steps/"+strconv.Itoa(step)+"/cancel"), struct{}{}, nil)
}

// Steps lists the steps of the jobs the caller may see (squeue -s);
// job 0 lists every job's.
func (c *Client) Steps(ctx context.Context, job uint64) ([]Step, error) {
	path := "/v1/steps"
	if job != 0 {
		path += "?job=" + strconv.FormatUint(job, 10)
	}
	var out []Step
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Forward sends r, as it is, to a controller member with the client's
// credentials and the headers hdr sets (replacing the caller's), and
// copies the answer (an upgraded exec stream too) to w: how a node daemon
// carries srun's requests from inside a job to the controllers.
func (c *Client) Forward(w http.ResponseWriter, r *http.Request, hdr http.Header) {
	target, _ := url.Parse(c.addrs[int(c.next.Load())%len(c.addrs)])
	p := &httputil.ReverseProxy{
		Transport:     c.http.Transport,
		FlushInterval: -1,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Del(UserHeader)
			if err := c.authorize(pr.In.Context(), pr.Out); err != nil {
				pr.Out.Header.Set("X-Corral-Auth-Error", err.Error())
			}
			for k, v := range hdr {
				pr.Out.Header[k] = v
			}
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			c.next.Add(1) // the next request tries another member
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			json.NewEncoder(w).Encode(Error{Error: fmt.Sprintf("the controllers could not be reached (%v); retry", err)})
		},
	}
	p.ServeHTTP(w, r)
}
