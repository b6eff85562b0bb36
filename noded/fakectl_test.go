package noded

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"corral/api"
)

// fakeCtl is a controller reduced to the node endpoints api.Client calls:
// register, heartbeat, status (reports) and the blocking desired-state
// query. A report removes its run from the node's allocations, as the real
// controller's FSM does; so do the reports a registration carries. It tells
// no lease unless leaseMS is set.
type fakeCtl struct {
	srv  *httptest.Server
	down atomic.Bool // answer everything with 503, as a cluster without a leader does
	// lag keeps reported runs in the desired state, as a member that has
	// not applied the report yet would.
	lag atomic.Bool
	// refuse answers reports with 503 and drops them, as a controller that
	// lost its leader while the node's watch was still answered would.
	refuse atomic.Bool
	// mute answers the node's messages (register, heartbeat, status) with
	// 503 but still serves its desired state, as a member cut off from
	// the leader does.
	mute atomic.Bool
	// leaseMS and timeoutMS are the lease and node timeout the answers to
	// registrations and heartbeats carry (0: none).
	leaseMS, timeoutMS atomic.Int64
	// startTimes is what the answers say of start times (NodeAck.StartTimes).
	startTimes atomic.Bool
	// health holds the health reports received, in order (under mu).
	health []api.HealthReport
	// heartbeats counts the heartbeats answered.
	heartbeats atomic.Int64

	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every change
	index   uint64
	boot    map[string]string    // node → boot id of its registration
	allocs  map[string][]api.Job // node → jobs it should run
	regs    []api.NodeInfo
	reports []api.JobReport
}

func newFakeCtl(t *testing.T) *fakeCtl {
	f := &fakeCtl{
		changed: make(chan struct{}),
		index:   1,
		boot:    make(map[string]string),
		allocs:  make(map[string][]api.Job),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/nodes/register", f.register)
	mux.HandleFunc("POST /v1/nodes/heartbeat", f.heartbeat)
	mux.HandleFunc("POST /v1/nodes/status", f.status)
	mux.HandleFunc("GET /v1/nodes/{name}/desired", f.desired)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.down.Load() || (f.mute.Load() && r.Method == http.MethodPost) {
			writeJSON(w, http.StatusServiceUnavailable, api.Error{Error: "no leader"})
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeCtl) client(t *testing.T) *api.Client {
	c, err := api.NewClient(f.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// bump records a change; callers hold f.mu.
func (f *fakeCtl) bump() {
	f.index++
	close(f.changed)
	f.changed = make(chan struct{})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (f *fakeCtl) register(w http.ResponseWriter, r *http.Request) {
	var info api.NodeInfo
	if err := json.NewDecoder(r.Body).Decode(&info); err != nil {
		writeJSON(w, 400, api.Error{Error: err.Error()})
		return
	}
	f.mu.Lock()
	f.boot[info.Name] = info.BootID
	f.regs = append(f.regs, info)
	f.takeReports(info.Name, info.Reports)
	f.bump()
	ack := f.ack()
	ack.Index = f.index
	f.mu.Unlock()
	writeJSON(w, 200, ack)
}

// ack is the answer to a registration or heartbeat.
func (f *fakeCtl) ack() api.NodeAck {
	return api.NodeAck{LeaseMS: f.leaseMS.Load(), NodeTimeoutMS: f.timeoutMS.Load(), StartTimes: f.startTimes.Load()}
}

// takeReports records reports and drops their runs from the node's
// allocations; callers hold f.mu.
func (f *fakeCtl) takeReports(node string, reps []api.JobReport) {
	f.reports = append(f.reports, reps...)
	for _, rep := range reps {
		if f.lag.Load() {
			break
		}
		f.allocs[node] = slices.DeleteFunc(f.allocs[node], func(j api.Job) bool {
			return j.ID == rep.JobID && j.StartIndex == rep.StartIndex
		})
	}
}

// known answers 404 unless the node registered with this boot id.
func (f *fakeCtl) known(w http.ResponseWriter, st api.NodeStatus) bool {
	if b, ok := f.boot[st.Name]; !ok || b != st.BootID {
		writeJSON(w, 404, api.Error{Error: "node " + st.Name + " is not registered; register first"})
		return false
	}
	return true
}

func (f *fakeCtl) heartbeat(w http.ResponseWriter, r *http.Request) {
	var st api.NodeStatus
	json.NewDecoder(r.Body).Decode(&st)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.known(w, st) {
		f.heartbeats.Add(1)
		writeJSON(w, 200, f.ack())
	}
}

func (f *fakeCtl) status(w http.ResponseWriter, r *http.Request) {
	var st api.NodeStatus
	json.NewDecoder(r.Body).Decode(&st)
	if f.refuse.Load() {
		writeJSON(w, http.StatusServiceUnavailable, api.Error{Error: "no leader"})
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.known(w, st) {
		return
	}
	f.takeReports(st.Name, st.Reports)
	if st.Health != nil {
		f.health = append(f.health, *st.Health)
	}
	f.bump()
	writeJSON(w, 200, struct{}{})
}

func (f *fakeCtl) desired(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	index, _ := strconv.ParseUint(r.URL.Query().Get("index"), 10, 64)
	wait, _ := time.ParseDuration(r.URL.Query().Get("wait"))
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		_, known := f.boot[name]
		d := api.Desired{Node: name, Index: f.index, Known: known, Allocations: []api.Allocation{}}
		for _, j := range f.allocs[name] {
			d.Allocations = append(d.Allocations, api.Allocation{Job: j})
		}
		ch := f.changed
		f.mu.Unlock()
		if !known || d.Index > index {
			writeJSON(w, 200, d)
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			if f.down.Load() {
				// A controller that went down does not answer the
				// queries it held either.
				writeJSON(w, http.StatusServiceUnavailable, api.Error{Error: "no leader"})
				return
			}
			writeJSON(w, 200, d)
			return
		case <-r.Context().Done():
			return
		}
	}
}

// addJob allocates job to node, stamping its StartIndex.
func (f *fakeCtl) addJob(node string, job api.Job) api.Job {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bump()
	job.StartIndex = f.index
	job.State = api.StateRunning
	job.Node = node
	f.allocs[node] = append(f.allocs[node], job)
	return job
}

// removeJob takes job id off node, as a cancel does.
func (f *fakeCtl) removeJob(node string, id uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.allocs[node] = slices.DeleteFunc(f.allocs[node], func(j api.Job) bool { return j.ID == id })
	f.bump()
}

func (f *fakeCtl) setDown(down bool) { f.down.Store(down) }

// forget drops the node, as a controller that lost its state would.
func (f *fakeCtl) forget(node string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.boot, node)
	f.bump()
}

func (f *fakeCtl) reportsFor(id uint64) []api.JobReport {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []api.JobReport
	for _, r := range f.reports {
		if r.JobID == id {
			out = append(out, r)
		}
	}
	return out
}

func (f *fakeCtl) registrations() []api.NodeInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.regs)
}

// waitReport waits for the first report of job id.
func (f *fakeCtl) waitReport(t *testing.T, id uint64, within time.Duration) api.JobReport {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if reps := f.reportsFor(id); len(reps) > 0 {
			return reps[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no report for job %d within %s", id, within)
		}
		time.Sleep(time.Millisecond)
	}
}
