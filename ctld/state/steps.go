package state

import (
	"fmt"
	"slices"
	"time"

	"corral/api"
)

// This file holds a job's steps: each `srun` inside a job (or an
// allocation) is a step, numbered from 0 per job, with the nodes of the
// job's run it launched tasks on and, once it ended, how. The launcher
// (srun) proposes a step's begin and end (Steps); the controller's
// accounting writes a run's ended steps in the run's record when the run
// ends (sacct's 12.0 lines).
// A step belongs to one run of its job: when the run ends, every step
// still running ends with it.

// Bounds on a job's steps, so one job cannot grow the replicated state
// without end: at most MaxActiveSteps running at once, and of the ended
// ones the newest MaxEndedSteps kept (and so in the run's accounting
// record: an earlier step of a job of more steps is not accounted).
const (
	MaxActiveSteps = 256
	MaxEndedSteps  = 128
)

// Step is one step of a job.
type Step struct {
	ID int `json:"id"`
	// Name is the step's command, as squeue -s shows it.
	Name string `json:"name"`
	// Run is the start index of the job's run the step belongs to.
	Run uint64 `json:"run"`
	// Nodes are the nodes its tasks run on, in the run's rank order;
	// NTasks its tasks in all, CPUsPerTask each one's CPUs.
	Nodes       []string `json:"nodes"`
	NTasks      int      `json:"ntasks"`
	CPUsPerTask int      `json:"cpus_per_task,omitempty"`
	// State is RUNNING until the step ends, then how it ended (COMPLETED,
	// FAILED, CANCELLED, ...), with the worst task's exit code or signal.
	State    api.JobState `json:"state"`
	ExitCode int          `json:"exit_code,omitempty"`
	Signal   int          `json:"signal,omitempty"`
	Start    time.Time    `json:"start"`
	End      time.Time    `json:"end,omitempty"`
	// Message says why it ended, when not by itself (cancelled by whom).
	Message string `json:"message,omitempty"`
}

// JobSteps are a job's steps: Next is the id the next one gets; List
// holds the running ones and the newest ended ones, in id order.
type JobSteps struct {
	Next int    `json:"next"`
	List []Step `json:"list,omitempty"`
}

// Steps changes jobs' steps, batched by the leader: steps that begin,
// steps that ended (as their launcher saw it), steps cancelled (scancel
// JOB.STEP). By is who asked, for a cancel.
type Steps struct {
	Now    time.Time   `json:"now"`
	Begin  []StepBegin `json:"begin,omitempty"`
	End    []StepEnd   `json:"end,omitempty"`
	Cancel []StepEnd   `json:"cancel,omitempty"`
	By     string      `json:"by,omitempty"`
}

// StepBegin asks for a step of a running job's run on some of its nodes.
type StepBegin struct {
	Job         uint64   `json:"job"`
	Run         uint64   `json:"run"`
	Name        string   `json:"name"`
	Nodes       []string `json:"nodes"`
	NTasks      int      `json:"ntasks"`
	CPUsPerTask int      `json:"cpus_per_task,omitempty"`
}

// StepEnd names a step and, for an end, how it ended.
type StepEnd struct {
	Job      uint64       `json:"job"`
	Step     int          `json:"step"`
	State    api.JobState `json:"state,omitempty"`
	ExitCode int          `json:"exit_code,omitempty"`
	Signal   int          `json:"signal,omitempty"`
}

// StepsResult answers Steps: the ids the begun steps got (-1 for one
// refused), in order, and why any part was refused.
type StepsResult struct {
	IDs    []int
	Errors []string
}

func (s *State) applySteps(c *Steps) *StepsResult {
	res := &StepsResult{}
	fail := func(format string, args ...any) {
		res.Errors = append(res.Errors, fmt.Sprintf(format, args...))
	}
	for _, b := range c.Begin {
		id, why := s.beginStep(b, c.Now)
		res.IDs = append(res.IDs, id)
		if why != "" {
			fail("job %d: %s", b.Job, why)
		}
	}
	for _, e := range c.End {
		if why := s.endStep(e, c.Now, ""); why != "" {
			fail("step %d.%d: %s", e.Job, e.Step, why)
		}
	}
	for _, e := range c.Cancel {
		e.State = api.StateCancelled
		msg := "cancelled"
		if c.By != "" {
			msg = "cancelled by " + c.By
		}
		if why := s.endStep(e, c.Now, msg); why != "" {
			fail("step %d.%d: %s", e.Job, e.Step, why)
		}
	}
	return res
}

// beginStep adds a step to a running job and returns its id, or -1 and
// why it cannot: the job is not running that run, a node is not one of
// the run's, too many steps run.
func (s *State) beginStep(b StepBegin, now time.Time) (int, string) {
	j := s.Jobs[b.Job]
	switch {
	case j == nil:
		return -1, "no such job"
	case j.State != api.StateRunning:
		return -1, fmt.Sprintf("is %s; steps run in a running job", j.State)
	case len(b.Nodes) == 0 || b.NTasks < len(b.Nodes):
		return -1, fmt.Sprintf("%d tasks on %d nodes: every node of a step runs a task at least", b.NTasks, len(b.Nodes))
	}
	run := s.activeAllocs(j)
	if len(run) == 0 || run[0].StartIndex != b.Run {
		return -1, "the run the step was asked for is over"
	}
	for i, n := range b.Nodes {
		if !slices.ContainsFunc(run, func(a *Allocation) bool { return a.Node == n }) || slices.Contains(b.Nodes[:i], n) {
			return -1, fmt.Sprintf("node %s is not one of the run's, or is named twice", n)
		}
	}
	steps := j.stepsCopy()
	active := 0
	for _, st := range steps.List {
		if st.State == api.StateRunning {
			active++
		}
	}
	if active >= MaxActiveSteps {
		return -1, fmt.Sprintf("%d steps run already; the most is %d", active, MaxActiveSteps)
	}
	st := Step{ID: steps.Next, Name: b.Name, Run: b.Run, Nodes: slices.Clone(b.Nodes), NTasks: b.NTasks,
		CPUsPerTask: b.CPUsPerTask, State: api.StateRunning, Start: now}
	for i, n := range st.Nodes {
		st.Nodes[i] = s.intern(n)
	}
	steps.Next++
	steps.List = append(steps.List, st)
	s.trimSteps(steps)
	c := *j
	c.Steps = steps
	s.putJob(&c)
	return st.ID, ""
}

// endStep ends a running step as e says (msg, when not "", says why).
func (s *State) endStep(e StepEnd, now time.Time, msg string) string {
	j := s.Jobs[e.Job]
	if j == nil || j.Steps == nil {
		return "no such step"
	}
	steps := j.stepsCopy()
	i := slices.IndexFunc(steps.List, func(st Step) bool { return st.ID == e.Step })
	switch {
	case i < 0:
		return "no such step"
	case steps.List[i].State != api.StateRunning:
		return fmt.Sprintf("ended already (%s)", steps.List[i].State)
	case !e.State.Terminal():
		return fmt.Sprintf("%q is not how a step ends", e.State)
	}
	st := &steps.List[i]
	st.State, st.ExitCode, st.Signal, st.End, st.Message = e.State, e.ExitCode, e.Signal, now, msg
	s.trimSteps(steps)
	c := *j
	c.Steps = steps
	s.putJob(&c)
	return ""
}

// endRunSteps ends job j's running steps (j is a private copy) as final,
// when its run ends.
func (s *State) endRunSteps(j *Job, final api.JobState, now time.Time) {
	if j.Steps == nil {
		return
	}
	steps := j.stepsCopy()
	changed := false
	for i := range steps.List {
		if st := &steps.List[i]; st.State == api.StateRunning {
			st.State, st.End, st.Message = final, now, "the job's run ended"
			changed = true
		}
	}
	if changed {
		s.trimSteps(steps)
		j.Steps = steps
	}
}

// trimSteps keeps the newest MaxEndedSteps ended steps.
func (s *State) trimSteps(steps *JobSteps) {
	ended := 0
	for _, st := range steps.List {
		if st.State != api.StateRunning {
			ended++
		}
	}
	for i := 0; ended > MaxEndedSteps && i < len(steps.List); {
		if steps.List[i].State != api.StateRunning {
			steps.List = slices.Delete(steps.List, i, i+1)
			ended--
			continue
		}
		i++
	}
}

// stepsCopy returns a private copy of the job's steps to change (records
// are copy-on-write).
func (j *Job) stepsCopy() *JobSteps {
	if j.Steps == nil {
		return &JobSteps{}
	}
	c := *j.Steps
	c.List = slices.Clone(c.List)
	for i := range c.List {
		c.List[i].Nodes = slices.Clip(c.List[i].Nodes)
	}
	return &c
}

// Step returns job j's step id, or nil.
func (j *Job) Step(id int) *Step {
	if j.Steps == nil {
		return nil
	}
	for i := range j.Steps.List {
		if j.Steps.List[i].ID == id {
			return &j.Steps.List[i]
		}
	}
	return nil
}
