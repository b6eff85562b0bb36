package noded

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"corral/api"
)

// The step forwarder carries srun's requests from inside a job to the
// controllers. A job finds it in CORRAL_STEP_ADDR and proves which run it
// is with CORRAL_STEP_TOKEN: "JOB.STARTINDEX.MAC", where MAC is an HMAC
// of the run with a key only this node's daemon holds (DataDir/step.key),
// so a token names one run and cannot be made up. The forwarder takes
// only that job's routes (its steps, and execs of its tasks), and sends
// them with the node's own credentials and api.JobHeader naming the job:
// the controllers take such a request as the job owner's when the node
// runs the job (ctld/steps.go). A job reaches its controllers through its
// node without credentials of its own, as a Slurm job's srun reaches
// slurmctld through its slurmd.
//
// It listens on loopback, where a job of the process runner runs; the
// address is kept in DataDir/step.addr and taken again by a restarted
// daemon, so the runs it re-adopts still reach it.

// stepTokenEnv and stepAddrEnv are the variables srun reads.
const (
	stepAddrEnv  = "CORRAL_STEP_ADDR"
	stepTokenEnv = "CORRAL_STEP_TOKEN"
)

// listenSteps starts the step forwarder on loopback, on the port an
// earlier daemon used when it is free; a runner whose guests reach the
// node at an address of their own (GuestSteps) needs no loopback one.
func (d *Daemon) listenSteps(ctx context.Context) error {
	if d.cfg.Client == nil {
		return nil
	}
	key, err := loadStepKey(filepath.Join(d.cfg.DataDir, "step.key"))
	if err != nil {
		return fmt.Errorf("noded: the step forwarder's key: %w", err)
	}
	d.stepKey = key
	if g, ok := d.runner.(GuestSteps); ok {
		d.stepAddr = g.GuestStepURL()
		return nil
	}
	if d.cfg.StepListen == "" {
		return nil
	}
	addrFile := filepath.Join(d.cfg.DataDir, "step.addr")
	want := d.cfg.StepListen
	if old, err := os.ReadFile(addrFile); err == nil && strings.HasSuffix(want, ":0") {
		want = strings.TrimSpace(string(old))
	}
	ln, err := net.Listen("tcp", want)
	if err != nil && want != d.cfg.StepListen {
		ln, err = net.Listen("tcp", d.cfg.StepListen)
	}
	if err != nil {
		return fmt.Errorf("noded: the step forwarder cannot listen on %s: %w", d.cfg.StepListen, err)
	}
	addr := ln.Addr().String()
	if err := os.WriteFile(addrFile, []byte(addr+"\n"), 0o600); err != nil {
		ln.Close()
		return err
	}
	d.stepAddr = "http://" + addr
	srv := &http.Server{Handler: http.HandlerFunc(d.forwardStep), ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	go srv.Serve(ln)
	context.AfterFunc(ctx, func() { srv.Close() })
	d.log.Info("step forwarder listening", "addr", d.stepAddr)
	return nil
}

// loadStepKey reads the node's step key, making one the first time.
func loadStepKey(path string) ([]byte, error) {
	if b, err := os.ReadFile(path); err == nil && len(b) >= 32 {
		return b, nil
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	return key, os.WriteFile(path, key, 0o600)
}

// stepToken is the token of run k.
func (d *Daemon) stepToken(k jobKey) string {
	mac := hmac.New(sha256.New, d.stepKey)
	mac.Write([]byte(k.String()))
	return strconv.FormatUint(k.ID, 10) + "." + strconv.FormatUint(k.StartIndex, 10) + "." + hex.EncodeToString(mac.Sum(nil)[:16])
}

// runOfToken returns the run a token names, if it is one of this node's.
func (d *Daemon) runOfToken(token string) (jobKey, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return jobKey{}, false
	}
	id, err1 := strconv.ParseUint(parts[0], 10, 64)
	si, err2 := strconv.ParseUint(parts[1], 10, 64)
	k := jobKey{ID: id, StartIndex: si}
	if err1 != nil || err2 != nil || !hmac.Equal([]byte(d.stepToken(k)), []byte(token)) {
		return jobKey{}, false
	}
	return k, true
}

// stepEnv is what a run gets to reach the forwarder; none without one.
func (d *Daemon) stepEnv(k jobKey) []string {
	if d.stepAddr == "" {
		return nil
	}
	return []string{stepAddrEnv + "=" + d.stepAddr, stepTokenEnv + "=" + d.stepToken(k)}
}

// forwardStep checks a request from inside a job on the loopback
// forwarder, where its token says which run it comes from, and forwards
// it.
func (d *Daemon) forwardStep(w http.ResponseWriter, r *http.Request) {
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	k, ok := d.runOfToken(token)
	var run *liveRun
	if runs := d.runs.Load(); ok && runs != nil {
		run = (*runs)[k.ID]
	}
	if run == nil || run.job.StartIndex != k.StartIndex {
		writeAPIError(w, refuse(http.StatusUnauthorized, "node %s: no run of this node goes with the step token (%s); srun works inside a running job", d.cfg.Name, stepTokenEnv))
		return
	}
	d.forwardJob(w, r, run)
}

// forwardJob forwards a request of job run's to the controllers, if it is
// one of its step routes.
func (d *Daemon) forwardJob(w http.ResponseWriter, r *http.Request, run *liveRun) {
	if err := stepRoute(r, run.job.ID); err != nil {
		writeAPIError(w, err)
		return
	}
	id := strconv.FormatUint(run.job.ID, 10)
	d.cfg.Client.Forward(w, r, http.Header{api.JobHeader: {id}, api.UserHeader: {run.job.Spec.User}})
}

// serveGuestSteps serves run lj's step requests where its guest reaches
// the node, when its handle opens such a listener (StepServer): only that
// guest reaches it, so the listener names the job. It stops with the run.
func (d *Daemon) serveGuestSteps(lj *localJob) {
	ss, ok := lj.handle.(StepServer)
	if !ok || d.cfg.Client == nil {
		return
	}
	ln, err := ss.ListenSteps()
	if err != nil {
		d.log.Warn("the job's guest cannot reach its step forwarder; srun will fail in it", "job", lj.key.ID, "err", err)
		return
	}
	id, h := lj.key.ID, lj.handle
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var run *liveRun
			if runs := d.runs.Load(); runs != nil {
				run = (*runs)[id]
			}
			if run == nil {
				writeAPIError(w, refuse(http.StatusConflict, "job %d does not run on node %s", id, d.cfg.Name))
				return
			}
			d.forwardJob(w, r, run)
		})}
	go srv.Serve(ln)
	go func() {
		h.Wait()
		srv.Close()
	}()
}

// stepRoute says why a job's request may not go through the forwarder:
// only the job's step routes, its execs (a step's tasks) and reads of the
// job and its steps may.
func stepRoute(r *http.Request, job uint64) error {
	prefix := "/v1/jobs/" + strconv.FormatUint(job, 10)
	p := r.URL.Path
	switch {
	case r.Method == http.MethodPost && (p == prefix+"/steps" || p == prefix+"/exec"):
	case r.Method == http.MethodPost && strings.HasPrefix(p, prefix+"/steps/") &&
		(strings.HasSuffix(p, "/end") || strings.HasSuffix(p, "/cancel")):
	case r.Method == http.MethodGet && p == prefix:
	case r.Method == http.MethodGet && p == "/v1/steps" && r.URL.Query().Get("job") == strconv.FormatUint(job, 10):
	default:
		return &apiError{status: http.StatusForbidden, msg: fmt.Sprintf("%s %s: a job's step token reaches its own steps only", r.Method, p)}
	}
	return nil
}
