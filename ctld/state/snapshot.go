package state

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"sort"
	"time"

	"corral/api"
)

// snapshotFormat is the version written in every snapshot header. Bump it
// when the record layout changes and keep a reader for the old one.
//
// Format 2 scopes request ids by user and keeps them in generations: a
// requestGen record precedes the request records made in it. Format 1 had
// one unscoped request record per id; readSnapshot takes each one's user
// and time from the job it names (readLegacyRequest).
const snapshotFormat = 2

type snapshotHeader struct {
	Format    int    `json:"format"`
	Index     uint64 `json:"index"`
	NextJobID uint64 `json:"next_job_id"`
}

// snapshotRecord is one line of a snapshot after the header; exactly one
// field is set.
type snapshotRecord struct {
	Job        *api.Job          `json:"job,omitempty"`
	Node       *api.Node         `json:"node,omitempty"`
	Request    *requestRecord    `json:"request,omitempty"`
	RequestGen *requestGenRecord `json:"request_gen,omitempty"`
	Member     *api.Member       `json:"member,omitempty"`
	// Policy holds the scheduler configuration, QoS, accounts, users and
	// usage: one record, written once.
	Policy *policyRecord `json:"policy,omitempty"`
}

// requestRecord is one remembered request id: the user's Key made Job.
// Format 1 wrote no User.
type requestRecord struct {
	Key  string `json:"key"`
	User string `json:"user,omitempty"`
	Job  uint64 `json:"job"`
}

// requestGenRecord starts a generation of request ids: the ones made from
// First to Last follow it.
type requestGenRecord struct {
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
}

// policyRecord is the policy part of the state in a snapshot.
type policyRecord struct {
	Config   api.SchedConfig   `json:"config"`
	QOS      []api.QOS         `json:"qos"`
	Accounts []api.Account     `json:"accounts,omitempty"`
	Users    []api.AccountUser `json:"users,omitempty"`
	Usage    []usageRecord     `json:"usage,omitempty"`
}

type usageRecord struct {
	UserKey
	Usage
}

// policyOf copies the policy part of s, sorted so snapshots are stable.
func policyOf(s *State) *policyRecord {
	p := &policyRecord{Config: s.Config}
	for _, n := range sortedKeys(s.QOS) {
		p.QOS = append(p.QOS, *s.QOS[n])
	}
	for _, n := range sortedKeys(s.Accounts) {
		p.Accounts = append(p.Accounts, *s.Accounts[n])
	}
	for _, u := range s.Users {
		p.Users = append(p.Users, *u)
	}
	sort.Slice(p.Users, func(a, b int) bool {
		if p.Users[a].Account != p.Users[b].Account {
			return p.Users[a].Account < p.Users[b].Account
		}
		return p.Users[a].Name < p.Users[b].Name
	})
	for k, u := range s.Usage {
		p.Usage = append(p.Usage, usageRecord{k, u})
	}
	sort.Slice(p.Usage, func(a, b int) bool {
		if p.Usage[a].Account != p.Usage[b].Account {
			return p.Usage[a].Account < p.Usage[b].Account
		}
		return p.Usage[a].User < p.Usage[b].User
	})
	return p
}

// restorePolicy puts a snapshot's policy record into s.
func restorePolicy(s *State, p *policyRecord) {
	s.Config = p.Config
	s.QOS = make(map[string]*api.QOS, len(p.QOS))
	for i := range p.QOS {
		s.QOS[p.QOS[i].Name] = &p.QOS[i]
	}
	for i := range p.Accounts {
		s.Accounts[p.Accounts[i].Name] = &p.Accounts[i]
	}
	for i := range p.Users {
		u := &p.Users[i]
		s.Users[UserKey{Account: u.Account, User: u.Name}] = u
	}
	for _, u := range p.Usage {
		s.Usage[u.UserKey] = u.Usage
	}
}

// Snapshot is an immutable view of a State: the controller takes it under
// its read lock and writes it later, while entries keep being applied.
// Copying the maps of pointers is enough: the records are never mutated.
type Snapshot struct {
	header   snapshotHeader
	policy   *policyRecord
	jobs     []*api.Job
	nodes    []*api.Node
	requests *RequestIDs
	members  map[string]string
}

// Snapshot captures the state as it is now.
func (s *State) Snapshot() *Snapshot {
	snap := &Snapshot{
		header:   snapshotHeader{Format: snapshotFormat, Index: s.Index, NextJobID: s.NextJobID},
		jobs:     make([]*api.Job, 0, len(s.Jobs)),
		nodes:    make([]*api.Node, 0, len(s.Nodes)),
		requests: s.Requests.clone(),
		policy:   policyOf(s),
		members:  maps.Clone(s.Members),
	}
	for _, id := range sortedJobIDs(s.Jobs) {
		snap.jobs = append(snap.jobs, s.Jobs[id])
	}
	for _, name := range sortedKeys(s.Nodes) {
		snap.nodes = append(snap.nodes, s.Nodes[name])
	}
	return snap
}

// Write streams the header and one JSON record per line, in an order that
// depends only on the state: equal states write equal bytes.
func (s *Snapshot) Write(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(s.header); err != nil {
		return err
	}
	for _, j := range s.jobs {
		if err := enc.Encode(snapshotRecord{Job: j}); err != nil {
			return err
		}
	}
	for _, n := range s.nodes {
		if err := enc.Encode(snapshotRecord{Node: n}); err != nil {
			return err
		}
	}
	var err error
	s.requests.each(func(first, last time.Time) {
		if err == nil {
			err = enc.Encode(snapshotRecord{RequestGen: &requestGenRecord{First: first, Last: last}})
		}
	}, func(user, id string, job uint64) {
		if err == nil {
			err = enc.Encode(snapshotRecord{Request: &requestRecord{Key: id, User: user, Job: job}})
		}
	})
	if err != nil {
		return err
	}
	for _, id := range sortedKeys(s.members) {
		if err := enc.Encode(snapshotRecord{Member: &api.Member{ID: id, HTTPAddr: s.members[id]}}); err != nil {
			return err
		}
	}
	if s.policy != nil {
		if err := enc.Encode(snapshotRecord{Policy: s.policy}); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// readLegacyRequest puts a format-1 request record, which has neither user
// nor time, in the one generation that holds them all (gen, made by the
// first such record). The job the id created says both: its user, and its
// submit time, which is the leader-stamped time of the entry that made the
// id. The generation spans the oldest to the newest of those times, so no
// id is forgotten earlier than its own time allows. Format-1 snapshots never
// lost a job, so the job is there; if not, the id is kept for the user ""
// and the generation's times are those of the others.
func (s *State) readLegacyRequest(gen *requestGen, r *requestRecord) *requestGen {
	user, made := "", time.Time{}
	if j := s.Jobs[r.Job]; j != nil {
		user, made = j.Spec.User, j.SubmitTime
	}
	if gen == nil {
		gen = s.Requests.newGen(made, made)
	}
	if !made.IsZero() {
		if gen.first.IsZero() || made.Before(gen.first) {
			gen.first = made
		}
		if made.After(gen.last) {
			gen.last = made
		}
	}
	gen.put(user, r.Key, r.Job)
	return gen
}

// ReadSnapshot reads a snapshot written by Write, or by an older build in
// format 1 or 2, into a new State. A record of no known kind is an error:
// a state that silently lost part of itself would diverge from its peers.
func ReadSnapshot(r io.Reader) (*State, error) {
	dec := json.NewDecoder(bufio.NewReaderSize(r, 1<<20))
	dec.DisallowUnknownFields()
	var h snapshotHeader
	if err := dec.Decode(&h); err != nil {
		return nil, fmt.Errorf("reading snapshot header: %w", err)
	}
	if h.Format != snapshotFormat && h.Format != 1 {
		return nil, fmt.Errorf("snapshot format %d is not supported (this build reads formats 1 and %d)", h.Format, snapshotFormat)
	}
	s := New()
	s.Index, s.NextJobID = h.Index, h.NextJobID
	var gen *requestGen
	for line := 2; ; line++ {
		var rec snapshotRecord
		err := dec.Decode(&rec)
		if errors.Is(err, io.EOF) {
			return s, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading snapshot record: %w", err)
		}
		switch {
		case rec.Job != nil:
			s.internSpec(&rec.Job.Spec)
			s.putJob(rec.Job)
		case rec.Node != nil:
			s.Nodes[rec.Node.Name] = rec.Node
		case rec.RequestGen != nil:
			gen = s.Requests.newGen(rec.RequestGen.First, rec.RequestGen.Last)
		case rec.Request != nil && h.Format == 1:
			gen = s.readLegacyRequest(gen, rec.Request)
		case rec.Request != nil:
			if gen == nil {
				return nil, fmt.Errorf("reading snapshot: request id %q of user %q comes before any request generation", rec.Request.Key, rec.Request.User)
			}
			gen.put(rec.Request.User, rec.Request.Key, rec.Request.Job)
		case rec.Member != nil:
			s.Members[rec.Member.ID] = rec.Member.HTTPAddr
		case rec.Policy != nil:
			restorePolicy(s, rec.Policy)
		default:
			return nil, fmt.Errorf("reading snapshot: record %d is of no kind this build knows (job, node, request, request_gen, member, policy)", line)
		}
	}
}
