package ctld

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	done  chan submitAnswer
}

type submitAnswer struct {
	results []api.SubmitResult
	err     error
}

// submit hands a validated batch to the leader's batcher and waits for its
// commit. Many concurrent calls share Raft entries.
func (c *Controller) submit(ctx context.Context, specs []state.JobSpec) ([]api.SubmitResult, error) {
	if !c.isLeading() {
		return nil, errNotLeader
	}
	call := &submitCall{specs: specs, done: make(chan submitAnswer, 1)}
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
	for _, call := range batch {
		specs = append(specs, call.specs...)
	}
	c.mu.Lock()
	cmd := &state.SubmitJobs{Now: c.clock.Now().UTC(), FirstID: c.nextJobID, Jobs: specs}
	c.nextJobID += uint64(len(specs))
	c.mu.Unlock()
	data, err := state.Encode(state.CmdSubmitJobs, cmd)
	if err != nil {
		<-sem
		answerAll(batch, nil, err)
		return
	}
	f := c.node.raft.Apply(data, 10*time.Second)
	go func() {
		defer func() { <-sem }()
		if err := f.Error(); err != nil {
			answerAll(batch, nil, fmt.Errorf("committing submission: %w", err))
			return
		}
		res, _ := f.Response().(*state.SubmitResult)
		if res == nil {
			answerAll(batch, nil, errors.New("submission produced no result"))
			return
		}
		answerAll(batch, res.Results, nil)
	}()
}
