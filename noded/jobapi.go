package noded

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"corral/api"
	"corral/internal/ident"
	"corral/internal/pki"
)

// The node's job API: what the controllers proxy to the node of a running
// job (exec, signals, files, output; see docs/api.md). The node is a trust
// boundary of its own: it checks the caller against the job's owner and
// every field again, whatever the controllers checked. Until requests are
// authenticated (issue #12) the caller is the api.UserHeader the
// controllers set; #12 replaces it with a short-lived assertion signed by
// the controllers (caller, job, operation, expiry), which the node
// verifies with their public key before anything here runs, and the node
// then listens with its own TLS credential.

// liveRun is a running job as the job API sees it: a copy the loop
// publishes (publishRuns), so that requests never touch the job table.
type liveRun struct {
	job     api.Job
	handle  Handle
	paused  bool
	killing bool
	// incoming is set while the run waits for a migration's stream or
	// for the word to continue: it is not running yet.
	incoming *liveMigration
}

// publishRuns refreshes the runs the job API may reach. The loop calls it
// whenever a run starts, ends, is paused, continued or killed.
func (d *Daemon) publishRuns() {
	m := make(map[uint64]*liveRun, len(d.jobs))
	for _, lj := range d.sortedJobs() {
		if lj.handle == nil {
			continue
		}
		run := &liveRun{job: lj.rec.Job, handle: lj.handle, paused: lj.rec.paused(), killing: lj.rec.Kill != nil}
		if lj.rec.Incoming != 0 {
			run.paused = true // not running until it is continued
			run.incoming = &liveMigration{id: lj.rec.Incoming}
			if lj.mig != nil {
				run.incoming.token, run.incoming.peer, run.incoming.claimed = lj.mig.token, lj.mig.peer, lj.mig.claimed
			}
		}
		m[lj.key.ID] = run
	}
	d.runs.Store(&m)
}

// apiAddr is the job API's URL, "" when it serves none.
func (d *Daemon) apiAddr() string {
	if p := d.apiURL.Load(); p != nil {
		return *p
	}
	return ""
}

// listenAPI starts the job API on Config.APIListen. A listener on every
// address advertises the node's name as its host.
func (d *Daemon) listenAPI(ctx context.Context) error {
	if d.cfg.APIListen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", d.cfg.APIListen)
	if err != nil {
		return fmt.Errorf("noded: the job API cannot listen on %s: %w (choose another --listen)", d.cfg.APIListen, err)
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = d.cfg.Name
	}
	scheme := "http://"
	if d.cfg.TLS.Enabled() {
		cfg, err := d.cfg.TLS.Server(tls.RequireAndVerifyClientCert)
		if err != nil {
			ln.Close()
			return fmt.Errorf("noded: the job API: %w", err)
		}
		// The controllers' proxy, and other nodes for the migration
		// streams they send (each route checks whom it takes).
		cfg.VerifyConnection = memberOrNode
		ln, scheme = tls.NewListener(ln, cfg), "https://"
	}
	u := scheme + net.JoinHostPort(host, port)
	d.apiURL.Store(&u)
	srv := &http.Server{Handler: d.apiRoutes(), ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	go srv.Serve(ln)
	context.AfterFunc(ctx, func() { srv.Close() })
	d.log.Info("job API listening", "addr", u)
	return nil
}

func (d *Daemon) apiRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/jobs/{id}/exec", membersOnly(d.handleExec))
	mux.HandleFunc("POST /v1/jobs/{id}/signal", membersOnly(d.handleSignal))
	mux.HandleFunc("GET /v1/jobs/{id}/file", membersOnly(d.handleReadFile))
	mux.HandleFunc("PUT /v1/jobs/{id}/file", membersOnly(d.handleWriteFile))
	mux.HandleFunc("GET /v1/jobs/{id}/output", membersOnly(d.handleOutput))
	mux.HandleFunc("POST /v1/jobs/{id}/steps/{step}/kill", membersOnly(d.handleKillStep))
	mux.HandleFunc("POST /v1/migrations/{id}/stream", d.handleMigrationStream)
	return mux
}

// memberOrNode takes a TLS peer with a controller member's certificate or
// a node's.
func memberOrNode(cs tls.ConnectionState) error {
	if id, ok := pki.PeerIdentity(&cs); ok && (id.Role == pki.RoleMember || id.Role == pki.RoleNode) {
		return nil
	}
	return errors.New("the job API takes controller members and nodes only")
}

// membersOnly refuses a TLS peer that is not a controller member: the job
// routes act for the user the controllers name, which only they may.
func membersOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil {
			if id, ok := pki.PeerIdentity(r.TLS); !ok || id.Role != pki.RoleMember {
				writeAPIError(w, refuse(http.StatusForbidden, "only the controllers reach into jobs"))
				return
			}
		}
		h(w, r)
	}
}

// apiError is a refusal of the job API.
type apiError struct {
	status int
	field  string
	msg    string
	errno  string
}

func (e *apiError) Error() string { return e.msg }

func refuse(status int, format string, args ...any) error {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...)}
}

// writeAPIError answers err: a refusal as it is, a failure inside the job
// by its errno (EACCES is 403, ENOENT 404), anything else 500.
func writeAPIError(w http.ResponseWriter, err error) {
	ae := &apiError{status: http.StatusInternalServerError, msg: err.Error()}
	var no syscall.Errno
	var fe *api.FieldError
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &fe):
		ae = &apiError{status: http.StatusBadRequest, field: fe.Field, msg: err.Error()}
	case errors.Is(err, ErrAgentUnavailable):
		ae.status = http.StatusServiceUnavailable
	case errors.As(err, &no):
		ae.errno = unix.ErrnoName(no)
		switch {
		case errors.Is(err, fs.ErrPermission):
			ae.status = http.StatusForbidden
		case errors.Is(err, fs.ErrNotExist):
			ae.status = http.StatusNotFound
		case no == syscall.EISDIR || no == syscall.EINVAL || no == syscall.ENOTDIR:
			ae.status = http.StatusBadRequest
		case no == syscall.ESRCH:
			ae.status = http.StatusConflict
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(ae.status)
	json.NewEncoder(w).Encode(api.Error{Error: ae.msg, Field: ae.field, Errno: ae.errno})
}

// reach finds the run a request names and checks the caller may reach into
// it: the job's owner, or root.
func (d *Daemon) reach(r *http.Request) (*liveRun, JobAgent, jobCtx, string, error) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		return nil, nil, jobCtx{}, "", refuse(http.StatusBadRequest, "%q is not a job id", r.PathValue("id"))
	}
	caller := r.Header.Get(api.UserHeader)
	if caller == "" {
		return nil, nil, jobCtx{}, "", refuse(http.StatusUnauthorized, "no caller named (%s): node %s takes job requests from the controllers", api.UserHeader, d.cfg.Name)
	}
	runs := d.runs.Load()
	var run *liveRun
	if runs != nil {
		run = (*runs)[id]
	}
	switch {
	case run == nil:
		return nil, nil, jobCtx{}, "", refuse(http.StatusNotFound, "job %d is not running on node %s", id, d.cfg.Name)
	case caller != run.job.Spec.User && caller != "root":
		return nil, nil, jobCtx{}, "", refuse(http.StatusForbidden, "job %d belongs to %s: only its owner (or root) may reach into it", id, run.job.Spec.User)
	case run.killing:
		return nil, nil, jobCtx{}, "", refuse(http.StatusConflict, "job %d is being stopped", id)
	case run.paused:
		return nil, nil, jobCtx{}, "", refuse(http.StatusConflict, "job %d is suspended: resume it first (scontrol resume %d)", id, id)
	}
	ja, ok := run.handle.(JobAgent)
	if !ok {
		return nil, nil, jobCtx{}, "", refuse(http.StatusNotImplemented, "node %s's %s runner cannot reach into a running job", d.cfg.Name, d.runner.Name())
	}
	jc, err := d.jobContext(&run.job)
	if err != nil {
		return nil, nil, jobCtx{}, "", err
	}
	return run, ja, jc, caller, nil
}

// decodeBody reads a small JSON body strictly.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &apiError{status: http.StatusBadRequest, field: "body", msg: "malformed JSON request body: " + err.Error()}
	}
	return nil
}

func (d *Daemon) handleSignal(w http.ResponseWriter, r *http.Request) {
	_, ja, _, _, err := d.reach(r)
	var req api.SignalRequest
	if err == nil {
		err = decodeBody(w, r, &req)
	}
	var sig int
	if err == nil {
		if sig, err = api.ParseSignal(req.Signal); err != nil {
			err = &apiError{status: http.StatusBadRequest, field: "signal", msg: err.Error()}
		}
	}
	if err == nil {
		scope := SignalAll
		if req.Batch {
			scope = SignalBatch
		}
		err = ja.Signal(r.Context(), syscall.Signal(sig), scope)
	}
	if err != nil {
		writeAPIError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, "{}\n")
}

// filePath reads and checks the path query parameter of a file request.
func filePath(r *http.Request, jc jobCtx) (string, error) {
	p := r.URL.Query().Get("path")
	if err := api.CheckJobPath(p); err != nil {
		return "", &apiError{status: http.StatusBadRequest, field: "path", msg: err.Error()}
	}
	return api.JobPath(jc.workDir, p), nil
}

func (d *Daemon) handleReadFile(w http.ResponseWriter, r *http.Request) {
	_, ja, jc, _, err := d.reach(r)
	var p string
	if err == nil {
		p, err = filePath(r, jc)
	}
	var rd io.ReadCloser
	var info FileInfo
	if err == nil {
		rd, info, err = ja.ReadFile(r.Context(), p, jc.user)
	}
	if err != nil {
		writeAPIError(w, err)
		return
	}
	defer rd.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set(api.FileModeHeader, strconv.FormatUint(uint64(info.Mode.Perm()), 8))
	w.Header().Set(api.FileSizeHeader, strconv.FormatInt(info.Size, 10))
	if _, err := io.Copy(w, rd); err != nil {
		// The status is sent: cutting the stream short is what is left
		// to say it failed.
		d.log.Warn("copying a file out of a job failed", "path", p, "err", err)
		panic(http.ErrAbortHandler)
	}
}

func (d *Daemon) handleWriteFile(w http.ResponseWriter, r *http.Request) {
	_, ja, jc, _, err := d.reach(r)
	var p string
	if err == nil {
		p, err = filePath(r, jc)
	}
	mode := uint64(0o644)
	if err == nil {
		if m := r.URL.Query().Get("mode"); m != "" {
			if mode, err = strconv.ParseUint(m, 8, 32); err != nil || mode > 0o777 {
				err = &apiError{status: http.StatusBadRequest, field: "mode", msg: fmt.Sprintf("mode %q: give permission bits in octal, 0 to 777", m)}
			}
		}
	}
	var wr io.WriteCloser
	if err == nil {
		wr, err = ja.WriteFile(r.Context(), p, fs.FileMode(mode), jc.user)
	}
	if err == nil {
		n, cerr := io.Copy(wr, r.Body)
		if err = wr.Close(); cerr != nil {
			err = fmt.Errorf("copying into %s after %d bytes: %w", p, n, cerr)
		}
	}
	if err != nil {
		writeAPIError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, "{}\n")
}

// handleOutput streams a job's output file from the node as it grows,
// until the job ends: attach without a shared file system. The file is
// where the runner puts the job's stdout (for a VM, QEMU writes the
// guest's serial port there), opened as the job's user.
func (d *Daemon) handleOutput(w http.ResponseWriter, r *http.Request) {
	run, _, jc, _, err := d.reach(r)
	path := jc.stdout
	if err == nil && r.URL.Query().Get("stream") == "stderr" && jc.stderr != "" {
		path = jc.stderr
	}
	if err == nil && (path == "" || path == os.DevNull) {
		err = refuse(http.StatusNotFound, "job %d keeps no output (it writes to %s)", run.job.ID, os.DevNull)
	}
	var f *os.File
	if err == nil {
		jc.user.Do(func() error { f, err = os.Open(path); return nil })
	}
	if err != nil {
		writeAPIError(w, err)
		return
	}
	defer f.Close()
	ended := make(chan struct{})
	go func() { run.handle.Wait(); close(ended) }()
	w.Header().Set("Content-Type", "application/octet-stream")
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Time{})
	done := false
	for {
		n, err := io.Copy(w, f)
		if err != nil {
			return
		}
		if n > 0 {
			rc.Flush()
		}
		if done {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-ended:
			done = true // one more copy for the last bytes
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// execUser is whom an exec runs as: the run's user, or root for an
// admin's request.
func execUser(jc jobCtx, req api.ExecRequest, caller string) (ident.User, error) {
	if !req.Root {
		return jc.user, nil
	}
	if caller != "root" {
		return ident.User{}, &apiError{status: http.StatusForbidden, field: "root", msg: "only root may exec as root"}
	}
	return ident.User{Name: "root", Home: "/root"}, nil
}

// mergeEnv returns base with extra's entries added or replacing theirs.
func mergeEnv(base, extra []string) []string {
	out := make([]string, 0, len(base)+len(extra))
	skip := map[string]bool{}
	for _, kv := range extra {
		k, _, _ := strings.Cut(kv, "=")
		skip[k] = true
	}
	for _, kv := range base {
		if k, _, _ := strings.Cut(kv, "="); !skip[k] {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}
