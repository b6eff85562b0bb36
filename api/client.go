package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// APIError is a refusal by a controller: a 4xx answer, or a 5xx that
// retrying did not cure.
type APIError struct {
	Status  int
	Message string
	Field   string
	// Errno is the system error a job I/O request failed with (EACCES).
	Errno string
	// RetryAfter is how long a 429 (too many requests) asked the client to
	// wait before trying again.
	RetryAfter time.Duration
}

func (e *APIError) Error() string { return e.Message }

// Client talks to a controller cluster. Any member will do: reads are served
// locally, writes are forwarded to the leader by the member. Calls are retried
// on other members while the cluster elects a leader, for up to RetryFor.
type Client struct {
	addrs    []string
	http     *http.Client
	next     atomic.Uint32
	RetryFor time.Duration
	// User is sent in UserHeader with every request: whom the caller says
	// it is. A cluster that authenticates requests believes it only from a
	// caller whose credentials allow acting for others (a controller
	// forwarding a request).
	User string
	// Auth, when set, gives each request's Authorization header.
	Auth Credentials
}

// NewClient returns a client for the comma-separated controller URLs in addrs
// (CORRAL_ADDR's format). A bare host:port gets http:// prepended.
func NewClient(addrs string) (*Client, error) { return NewTLSClient(addrs, nil) }

// NewTLSClient is NewClient for a cluster that runs over TLS when cfg is
// set: servers are verified with cfg (the cluster's authority, and the
// caller's certificate when it has one) and a bare host:port gets https://.
func NewTLSClient(addrs string, cfg *tls.Config) (*Client, error) {
	scheme := "http://"
	if cfg != nil {
		scheme = "https://"
	}
	var list []string
	for _, a := range strings.Split(addrs, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if !strings.Contains(a, "://") {
			a = scheme + a
		}
		if _, err := url.Parse(a); err != nil {
			return nil, fmt.Errorf("controller address %q: %w", a, err)
		}
		list = append(list, strings.TrimRight(a, "/"))
	}
	if len(list) == 0 {
		return nil, errors.New("no controller address: set CORRAL_ADDR to the controllers' URLs, e.g. http://127.0.0.1:7001")
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		TLSClientConfig:     cfg,
	}
	return &Client{addrs: list, http: &http.Client{Transport: tr}, RetryFor: 15 * time.Second}, nil
}

// CloseIdle closes the connections the client keeps open for its next
// calls: for a caller done with it that goes on running.
func (c *Client) CloseIdle() { c.http.CloseIdleConnections() }

// Addrs returns the controller URLs the client knows.
func (c *Client) Addrs() []string { return append([]string(nil), c.addrs...) }

// retryable reports whether another member (or a later try) may succeed.
func retryable(status int) bool {
	return status == http.StatusServiceUnavailable || status == http.StatusBadGateway || status == http.StatusGatewayTimeout
}

// do sends one request, rotating through members on connection errors and
// 5xx answers that mean "no leader yet", and trying the same member again
// after a 429 once its Retry-After has passed, if that is within RetryFor.
// out may be nil.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(c.RetryFor)
	backoff := 20 * time.Millisecond
	var lastErr error
	for attempt := 0; ; attempt++ {
		n := c.next.Load()
		i := int(n % uint32(len(c.addrs)))
		addr := c.addrs[i]
		status, err := c.once(ctx, method, addr+path, body, out)
		if err == nil {
			return nil
		}
		if errors.Is(err, errStreamCut) {
			return err // part of it is written: another try would repeat it
		}
		var apiErr *APIError
		if errors.As(err, &apiErr) && status == http.StatusTooManyRequests {
			if !waitRetryAfter(ctx, apiErr.RetryAfter, deadline) {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return err
			}
			continue
		}
		if errors.As(err, &apiErr) && !retryable(status) {
			return err
		}
		if why := transportMistake(addr, err); why != nil {
			return why // no other member or later try can mend it
		}
		lastErr = err
		// Move on from the member that failed, unless another call
		// already did (the counter, not its position, is compared: a
		// position repeats once every member was tried).
		c.next.CompareAndSwap(n, n+1)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no controller answered within %s (tried %s): %w", c.RetryFor, strings.Join(c.addrs, ", "), lastErr)
		}
		// Cycle through all members quickly, then back off.
		if (attempt+1)%len(c.addrs) == 0 {
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return ctx.Err()
			}
			if backoff < 500*time.Millisecond {
				backoff *= 2
			}
		}
	}
}

// retryAfter reads a Retry-After header: seconds or an HTTP date; a
// missing or unreadable one is 1 s.
func retryAfter(v string) time.Duration {
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, time.Until(t))
	}
	return time.Second
}

// waitRetryAfter waits d and reports true, or reports false at once when d
// would end past deadline, or when ctx ends first.
func waitRetryAfter(ctx context.Context, d time.Duration, deadline time.Time) bool {
	if time.Now().Add(d).After(deadline) {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (c *Client) once(ctx context.Context, method, u string, body []byte, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if err := c.authorize(ctx, req); err != nil {
		return 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if so, ok := out.(*streamOut); ok && resp.StatusCode < 300 {
		return resp.StatusCode, so.copy(resp)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 300 {
		var e Error
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			e.Error = fmt.Sprintf("%s %s: %s: %s", method, u, resp.Status, strings.TrimSpace(string(data)))
			if resp.StatusCode == http.StatusBadRequest && strings.Contains(string(data), "HTTPS server") {
				e.Error = fmt.Sprintf("the controller at %s serves HTTPS: name it https://%s in CORRAL_ADDR and set CORRAL_CA to the cluster's ca.crt", req.URL.Host, req.URL.Host)
			}
		}
		return resp.StatusCode, &APIError{Status: resp.StatusCode, Message: e.Error, Field: e.Field, Errno: e.Errno,
			RetryAfter: retryAfter(resp.Header.Get("Retry-After"))}
	}
	if raw, ok := out.(*[]byte); ok {
		*raw = data
		return resp.StatusCode, nil
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decoding answer of %s %s: %w", method, u, err)
		}
	}
	return resp.StatusCode, nil
}

// Submit submits a batch of jobs; each should carry a RequestID so that the
// client's own retries never create a job twice.
func (c *Client) Submit(ctx context.Context, jobs []JobSpec) ([]SubmitResult, error) {
	var resp SubmitResponse
	if err := c.do(ctx, http.MethodPost, "/v1/jobs", SubmitRequest{Jobs: jobs}, &resp); err != nil {
		return nil, err
	}
	return resp.Results, nil
}

// Jobs lists jobs matching f. consistent forces a read on the leader.
func (c *Client) Jobs(ctx context.Context, f JobFilter, consistent bool) ([]Job, error) {
	q := filterQuery(f)
	if consistent {
		q.Set("consistent", "1")
	}
	// The compact listing decodes an order of magnitude faster than JSON.
	q.Set("format", "rows")
	var raw []byte
	if err := c.do(ctx, http.MethodGet, "/v1/jobs?"+q.Encode(), nil, &raw); err != nil {
		return nil, err
	}
	return DecodeJobRows(bytes.NewReader(raw))
}

// QueueQuery asks a controller to render a job listing as squeue would.
type QueueQuery struct {
	Filter   JobFilter
	Format   string
	NoHeader bool
	Long     bool
	Start    bool
	// Fields is -O (squeue's long field names, which win over Format),
	// Sort is -S (empty: squeue's default "P,t,-p"), Array is -r (one line
	// per array task) and Dated prints the date above the header (-i).
	Fields string
	Sort   string
	Array  bool
	Dated  bool
}

// QueueText returns the listing rendered by the controller. Rendering where
// the jobs live keeps `corral queue` fast with 100,000 jobs: nothing but the
// text crosses the wire.
func (c *Client) QueueText(ctx context.Context, q QueueQuery) ([]byte, error) {
	v := filterQuery(q.Filter)
	for name, val := range map[string]string{"format": q.Format, "fields": q.Fields, "sort": q.Sort} {
		if val != "" {
			v.Set(name, val)
		}
	}
	for name, on := range map[string]bool{"noheader": q.NoHeader, "long": q.Long, "start": q.Start, "array": q.Array, "dated": q.Dated} {
		if on {
			v.Set(name, "1")
		}
	}
	var out []byte
	return out, c.do(ctx, http.MethodGet, "/v1/queue?"+v.Encode(), nil, &out)
}

func filterQuery(f JobFilter) url.Values {
	q := url.Values{}
	for _, id := range f.IDs {
		q.Add("id", strconv.FormatUint(id, 10))
	}
	for _, t := range f.Tasks {
		q.Add("id", t.String())
	}
	for _, u := range f.Users {
		q.Add("user", u)
	}
	for _, n := range f.Names {
		q.Add("name", n)
	}
	for _, s := range f.States {
		q.Add("state", string(s))
	}
	for _, p := range f.Partitions {
		q.Add("partition", p)
	}
	for _, a := range f.Accounts {
		q.Add("account", a)
	}
	for _, a := range f.QOS {
		q.Add("qos", a)
	}
	for _, a := range f.Nodes {
		q.Add("node", a)
	}
	for _, a := range f.Reservations {
		q.Add("reservation", a)
	}
	return q
}

// Job returns one job.
func (c *Client) Job(ctx context.Context, id uint64, consistent bool) (*Job, error) {
	var j Job
	path := "/v1/jobs/" + strconv.FormatUint(id, 10)
	if consistent {
		path += "?consistent=1"
	}
	if err := c.do(ctx, http.MethodGet, path, nil, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// JobByRef returns a job as users name it: "12", or "12_5" for task 5 of
// array 12 (the array's pending record while the task has not started).
func (c *Client) JobByRef(ctx context.Context, ref string, consistent bool) (*Job, error) {
	var j Job
	path := "/v1/jobs/" + url.PathEscape(ref)
	if consistent {
		path += "?consistent=1"
	}
	if err := c.do(ctx, http.MethodGet, path, nil, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// Cancel cancels the jobs matching the request's filter.
func (c *Client) Cancel(ctx context.Context, req CancelRequest) (*CancelResponse, error) {
	var resp CancelResponse
	return &resp, c.do(ctx, http.MethodPost, "/v1/jobs/cancel", req, &resp)
}

// Hold holds or releases pending jobs.
func (c *Client) Hold(ctx context.Context, req HoldRequest) (*HoldResponse, error) {
	var resp HoldResponse
	return &resp, c.do(ctx, http.MethodPost, "/v1/jobs/hold", req, &resp)
}

// Suspend suspends or resumes running jobs.
func (c *Client) Suspend(ctx context.Context, req SuspendRequest) (*HoldResponse, error) {
	var resp HoldResponse
	return &resp, c.do(ctx, http.MethodPost, "/v1/jobs/suspend", req, &resp)
}

// Checkpoint saves running jobs to checkpoints, or restores checkpointed
// ones (CheckpointRequest).
func (c *Client) Checkpoint(ctx context.Context, req CheckpointRequest) (*HoldResponse, error) {
	var resp HoldResponse
	return &resp, c.do(ctx, http.MethodPost, "/v1/jobs/checkpoint", req, &resp)
}

// Migrate asks for live migrations of running jobs, or aborts them
// (MigrateRequest).
func (c *Client) Migrate(ctx context.Context, req MigrateRequest) (*HoldResponse, error) {
	var resp HoldResponse
	return &resp, c.do(ctx, http.MethodPost, "/v1/jobs/migrate", req, &resp)
}

// TestOnly asks when and where jobs would start, storing nothing (sbatch
// --test-only).
func (c *Client) TestOnly(ctx context.Context, jobs []JobSpec) ([]WillRun, error) {
	var resp SubmitResponse
	if err := c.do(ctx, http.MethodPost, "/v1/jobs", SubmitRequest{Jobs: jobs, TestOnly: true}, &resp); err != nil {
		return nil, err
	}
	if len(resp.WillRun) != len(jobs) {
		return nil, fmt.Errorf("the controller answered %d test-only results for %d jobs", len(resp.WillRun), len(jobs))
	}
	return resp.WillRun, nil
}

// Licenses lists the cluster's licenses and their use.
func (c *Client) Licenses(ctx context.Context) ([]LicenseUse, error) {
	var out []LicenseUse
	return out, c.do(ctx, http.MethodGet, "/v1/licenses", nil, &out)
}

// Top moves pending jobs to the top of their user's queue (scontrol top).
func (c *Client) Top(ctx context.Context, req TopRequest) (*HoldResponse, error) {
	var resp HoldResponse
	return &resp, c.do(ctx, http.MethodPost, "/v1/jobs/top", req, &resp)
}

// Requeue puts jobs back in the queue (and holds them with Hold).
func (c *Client) Requeue(ctx context.Context, req RequeueRequest) (*HoldResponse, error) {
	var resp HoldResponse
	return &resp, c.do(ctx, http.MethodPost, "/v1/jobs/requeue", req, &resp)
}

// Nodes lists every node.
func (c *Client) Nodes(ctx context.Context) ([]Node, error) {
	var nodes []Node
	return nodes, c.do(ctx, http.MethodGet, "/v1/nodes", nil, &nodes)
}

// Node returns one node.
func (c *Client) Node(ctx context.Context, name string) (*Node, error) {
	var n Node
	if err := c.do(ctx, http.MethodGet, "/v1/nodes/"+url.PathEscape(name), nil, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// Drain drains or resumes a node.
func (c *Client) Drain(ctx context.Context, req DrainRequest) error {
	return c.do(ctx, http.MethodPost, "/v1/nodes/drain", req, nil)
}

// SetNodeFeatures sets a node's features in place of those its daemon
// reports, or with req.Reset gives them back to the daemon's.
func (c *Client) SetNodeFeatures(ctx context.Context, req NodeFeaturesRequest) error {
	return c.do(ctx, http.MethodPost, "/v1/nodes/features", req, nil)
}

// ForgetNodeKey lets node register with a new key (a reinstalled node's).
func (c *Client) ForgetNodeKey(ctx context.Context, node string) error {
	return c.do(ctx, http.MethodPost, "/v1/nodes/forget-key", DrainRequest{Node: node}, nil)
}

// Status returns the cluster's status as seen by the member that answers.
func (c *Client) Status(ctx context.Context) (*ClusterStatus, error) {
	return c.status(ctx, "/v1/status")
}

// StatusWithHash is Status plus a digest of the member's replicated state.
func (c *Client) StatusWithHash(ctx context.Context) (*ClusterStatus, error) {
	return c.status(ctx, "/v1/status?hash=1")
}

func (c *Client) status(ctx context.Context, path string) (*ClusterStatus, error) {
	var s ClusterStatus
	if err := c.do(ctx, http.MethodGet, path, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Register records a node daemon with the cluster.
func (c *Client) Register(ctx context.Context, info NodeInfo) error {
	_, err := c.RegisterNode(ctx, info)
	return err
}

// RegisterNode records a node daemon with the cluster and returns the
// controllers' answer: the node's lease and the registration's index.
func (c *Client) RegisterNode(ctx context.Context, info NodeInfo) (NodeAck, error) {
	var ack NodeAck
	err := c.do(ctx, http.MethodPost, "/v1/nodes/register", info, &ack)
	return ack, err
}

// Heartbeat tells the cluster the node daemon is alive. A 404 answer means
// the cluster does not know the node and it must register again.
func (c *Client) Heartbeat(ctx context.Context, name, bootID string) error {
	_, err := c.HeartbeatNode(ctx, name, bootID)
	return err
}

// HeartbeatNode is Heartbeat that returns the controllers' answer: the
// node's lease.
func (c *Client) HeartbeatNode(ctx context.Context, name, bootID string) (NodeAck, error) {
	var ack NodeAck
	err := c.do(ctx, http.MethodPost, "/v1/nodes/heartbeat", NodeStatus{Name: name, BootID: bootID}, &ack)
	return ack, err
}

// Report sends job reports from a node.
func (c *Client) Report(ctx context.Context, st NodeStatus) error {
	return c.do(ctx, http.MethodPost, "/v1/nodes/status", st, nil)
}

// Desired returns the node's desired state once its index passes index, or
// after wait with the current state.
func (c *Client) Desired(ctx context.Context, node string, index uint64, wait time.Duration) (*Desired, error) {
	var d Desired
	path := fmt.Sprintf("/v1/nodes/%s/desired?index=%d&wait=%s", url.PathEscape(node), index, wait)
	if err := c.do(ctx, http.MethodGet, path, nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// Partitions lists the partitions.
func (c *Client) Partitions(ctx context.Context) ([]Partition, error) {
	var parts []Partition
	return parts, c.do(ctx, http.MethodGet, "/v1/partitions", nil, &parts)
}

// Policy returns the scheduler's configuration, QoS, accounts and users.
func (c *Client) Policy(ctx context.Context) (*PolicyView, error) {
	var v PolicyView
	return &v, c.do(ctx, http.MethodGet, "/v1/policy", nil, &v)
}

// SetConfig changes scheduler settings by name.
func (c *Client) SetConfig(ctx context.Context, req ConfigRequest) error {
	return c.do(ctx, http.MethodPost, "/v1/config", req, nil)
}

// PutQOS adds, replaces or deletes a QoS.
func (c *Client) PutQOS(ctx context.Context, req QOSRequest) error {
	return c.do(ctx, http.MethodPost, "/v1/qos", req, nil)
}

// PutAccount adds, replaces or deletes an account.
func (c *Client) PutAccount(ctx context.Context, req AccountRequest) error {
	return c.do(ctx, http.MethodPost, "/v1/accounts", req, nil)
}

// PutUser adds, replaces or deletes a user's association.
func (c *Client) PutUser(ctx context.Context, req UserRequest) error {
	return c.do(ctx, http.MethodPost, "/v1/users", req, nil)
}

// Priorities returns the pending jobs' priorities and factors.
func (c *Client) Priorities(ctx context.Context) ([]PriorityRow, error) {
	var rows []PriorityRow
	return rows, c.do(ctx, http.MethodGet, "/v1/priority", nil, &rows)
}

// Shares returns the fair-share tree as sshare rows.
func (c *Client) Shares(ctx context.Context) ([]ShareRow, error) {
	var rows []ShareRow
	return rows, c.do(ctx, http.MethodGet, "/v1/share", nil, &rows)
}

// Why explains a job ("12" or "12_5").
func (c *Client) Why(ctx context.Context, ref string) (*Why, error) {
	var w Why
	return &w, c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(ref)+"/why", nil, &w)
}

// UpdateJob changes a pending job's dependency.
func (c *Client) UpdateJob(ctx context.Context, req UpdateJobRequest) error {
	return c.do(ctx, http.MethodPost, "/v1/jobs/update", req, nil)
}

// PutPartition adds, changes or deletes a partition.
func (c *Client) PutPartition(ctx context.Context, req PartitionRequest) error {
	return c.do(ctx, "POST", "/v1/partitions", req, nil)
}

// transportMistake explains a connection error that retrying cannot mend:
// a controller whose certificate this client cannot verify (no CORRAL_CA,
// or another cluster's), or one that speaks plain HTTP to an https:// URL.
// Nil for every other error.
func transportMistake(addr string, err error) error {
	var cv *tls.CertificateVerificationError
	if errors.As(err, &cv) {
		return fmt.Errorf("the controller at %s showed a certificate this client cannot verify (%v): set CORRAL_CA to the cluster's ca.crt (corral ca init)", addr, cv.Err)
	}
	if strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		return fmt.Errorf("the controller at %s speaks plain HTTP: name it http:// in CORRAL_ADDR", addr)
	}
	return nil
}

// MemberPing is one controller member's answer to Ping.
type MemberPing struct {
	Member
	// Up says the member answered its status request; Err says why not.
	Up  bool   `json:"up"`
	Err string `json:"error,omitempty"`
	// Took is how long the member took to answer.
	Took time.Duration `json:"took_ns"`
}

// Ping asks every member of the cluster (as the first member to answer
// lists them) for its status, each directly and once, with timeout per
// member: scontrol ping.
func (c *Client) Ping(ctx context.Context, timeout time.Duration) ([]MemberPing, error) {
	st, err := c.Status(ctx)
	if err != nil {
		return nil, err
	}
	scheme := "http://"
	if strings.HasPrefix(c.addrs[0], "https://") {
		scheme = "https://"
	}
	out := make([]MemberPing, len(st.Members))
	var wg sync.WaitGroup
	for i, m := range st.Members {
		out[i].Member = m
		if m.HTTPAddr == "" {
			out[i].Err = "it has not announced an HTTP address"
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr := m.HTTPAddr
			if !strings.Contains(addr, "://") {
				addr = scheme + addr
			}
			mctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			began := time.Now()
			var s ClusterStatus
			if _, err := c.once(mctx, http.MethodGet, addr+"/v1/status", nil, &s); err != nil {
				out[i].Err = err.Error()
				return
			}
			out[i].Up, out[i].Took = true, time.Since(began)
		}()
	}
	wg.Wait()
	return out, nil
}

// streamOut is an answer whose body is copied to w as it arrives (an
// export of a year's records is never held whole), and whose trailers are
// kept once it ended.
type streamOut struct {
	w       io.Writer
	trailer http.Header
}

// errStreamCut is a streamed answer that broke after some of it was
// written: it is not tried again.
var errStreamCut = errors.New("the controller's answer was cut short")

func (so *streamOut) copy(resp *http.Response) error {
	n, err := io.Copy(so.w, resp.Body)
	if err != nil {
		if n > 0 {
			return fmt.Errorf("%w after %d bytes: %w", errStreamCut, n, err)
		}
		return err
	}
	so.trailer = resp.Trailer
	return nil
}
