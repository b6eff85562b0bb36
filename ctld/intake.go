package ctld

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"corral/api"
	"corral/ctld/state"
)

// errNotLeader tells a handler to forward the request to the leader.
var errNotLeader = errors.New("this member is not the leader")

// maxJobsPerEntry bounds one SubmitJobs entry so that an entry stays small
// enough to replicate quickly.
const maxJobsPerEntry = 4096

// maxInFlight bounds the SubmitJobs entries proposed but not yet committed.
const maxInFlight = 32

type submitCall struct {
	specs []state.JobSpec
	// blobs holds, per spec, the content of the script and environment
	// it names by key (state.OutOfLine).
	blobs [][]state.BlobRecord
	done  chan submitAnswer
}

type submitAnswer struct {
	results []api.SubmitResult
	err     error
}

// submit hands a validated batch to the leader's batcher and waits for its
// commit. Many concurrent calls share Raft entries. The jobs' scripts and
// environments are moved out of line here, in the request's goroutine.
func (c *Controller) submit(ctx context.Context, specs []state.JobSpec) ([]api.SubmitResult, error) {
	if !c.isLeading() {
		return nil, errNotLeader
	}
	call := &submitCall{specs: specs, blobs: make([][]state.BlobRecord, len(specs)), done: make(chan submitAnswer, 1)}
	for i := range specs {
		call.blobs[i] = state.OutOfLine(&specs[i])
	}
	select {
	case c.submits <- call:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case a := <-call.done:
		return a.results, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// submitLoop drains queued submissions into few SubmitJobs entries, stamping
// ids and the submit time, with up to maxInFlight entries being replicated
// at once.
func (c *Controller) submitLoop(ctx context.Context) {
	sem := make(chan struct{}, maxInFlight)
	for {
		var first *submitCall
		select {
		case <-ctx.Done():
			c.failQueued()
			return
		case first = <-c.submits:
		}
		batch := []*submitCall{first}
		n := len(first.specs)
	drain:
		for n < maxJobsPerEntry {
			select {
			case call := <-c.submits:
				batch = append(batch, call)
				n += len(call.specs)
			default:
				break drain
			}
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			answerAll(batch, nil, errNotLeader)
			c.failQueued()
			return
		}
		c.proposeBatch(batch, n, sem)
	}
}

func (c *Controller) failQueued() {
	for {
		select {
		case call := <-c.submits:
			call.done <- submitAnswer{err: errNotLeader}
		default:
			return
		}
	}
}

func answerAll(batch []*submitCall, results []api.SubmitResult, err error) {
	for _, call := range batch {
		if err != nil {
			call.done <- submitAnswer{err: err}
			continue
		}
		call.done <- submitAnswer{results: results[:len(call.specs)]}
		results = results[len(call.specs):]
	}
}

// proposeBatch stamps and proposes one entry; a goroutine waits for its
// commit so the next batch can be proposed meanwhile.
func (c *Controller) proposeBatch(batch []*submitCall, n int, sem chan struct{}) {
	specs := make([]state.JobSpec, 0, n)
	blobs := make([][]state.BlobRecord, 0, n)
	for _, call := range batch {
		specs = append(specs, call.specs...)
		blobs = append(blobs, call.blobs...)
	}
	f, err := c.proposeSubmit(specs, c.newBlobs(blobs))
	if err != nil {
		<-sem
		answerAll(batch, nil, err)
		return
	}
	go func() {
		defer func() { <-sem }()
		res, err := c.submitResult(f)
		if err == nil && len(res.Missing) > 0 {
			err = c.resubmitMissing(specs, blobs, res)
		}
		if err != nil {
			answerAll(batch, nil, err)
			return
		}
		answerAll(batch, res.Results, nil)
	}()
}

// proposeSubmit stamps ids and the submit time on specs and proposes them
// as one SubmitJobs entry carrying blobs.
func (c *Controller) proposeSubmit(specs []state.JobSpec, blobs []state.BlobRecord) (raft.ApplyFuture, error) {
	c.mu.Lock()
	cmd := &state.SubmitJobs{Now: c.clock.Now().UTC(), FirstID: c.nextJobID, Jobs: specs, Blobs: blobs}
	c.nextJobID += uint64(len(specs))
	c.mu.Unlock()
	data, err := state.Encode(state.CmdSubmitJobs, cmd)
	if err != nil {
		return nil, err
	}
	return c.node.raft.Apply(data, 10*time.Second), nil
}

// submitResult waits for a SubmitJobs entry's commit and returns its
// result.
func (c *Controller) submitResult(f raft.ApplyFuture) (*state.SubmitResult, error) {
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("committing submission: %w", err)
	}
	res, _ := f.Response().(*state.SubmitResult)
	if res == nil {
		return nil, errors.New("submission produced no result")
	}
	return res, nil
}

// newBlobs returns the blobs of a batch that the entry must carry: each
// once, and none the state holds already (a job names those by key). A
// blob the state forgets before the entry applies (its last job purged
// meanwhile) makes the apply refuse the jobs naming it, and
// resubmitMissing sends them again with it.
func (c *Controller) newBlobs(perSpec [][]state.BlobRecord) []state.BlobRecord {
	var out []state.BlobRecord
	seen := map[string]bool{}
	c.fsm.Read(func(s *state.State) {
		for _, recs := range perSpec {
			for _, r := range recs {
				if !seen[r.Key] && !s.HasBlob(r.Key) {
					out = append(out, r)
				}
				seen[r.Key] = true
			}
		}
	})
	return out
}

// resubmitMissing proposes again, with all their blobs, the jobs the
// apply refused for a blob it no longer held, and puts their results in
// res.
func (c *Controller) resubmitMissing(specs []state.JobSpec, blobs [][]state.BlobRecord, res *state.SubmitResult) error {
	again := make([]state.JobSpec, len(res.Missing))
	var all []state.BlobRecord
	seen := map[string]bool{}
	for i, k := range res.Missing {
		again[i] = specs[k]
		for _, r := range blobs[k] {
			if !seen[r.Key] {
				all = append(all, r)
				seen[r.Key] = true
			}
		}
	}
	f, err := c.proposeSubmit(again, all)
	if err != nil {
		return err
	}
	res2, err := c.submitResult(f)
	if err != nil {
		return err
	}
	for i, k := range res.Missing {
		res.Results[k] = res2.Results[i]
	}
	res.Missing = nil
	return nil
}
