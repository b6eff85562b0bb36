package state

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"time"

	"corral/api"
	"corral/migrate"
)

// snapshotFormat is the version written in every snapshot header. Bump it
// when the record layout changes and keep a reader for the old ones
// (snapshot_legacy.go).
//
// Format 3 writes the state's own records: jobs without where they run,
// allocations (active and ended, after the jobs), and nodes that list their
// allocations; the header carries the next allocation id. Format 2 (and 1)
// wrote the jobs with their one run inlined and nodes that listed job ids.
// Format 2 scopes request ids by user and keeps them in generations: a
// requestGen record precedes the request records made in it; format 1 had
// one unscoped request record per id.
const snapshotFormat = 3

type snapshotHeader struct {
	Format          int    `json:"format"`
	Index           uint64 `json:"index"`
	NextJobID       uint64 `json:"next_job_id"`
	NextAllocID     uint64 `json:"next_alloc_id,omitempty"`
	NextMigrationID uint64 `json:"next_migration_id,omitempty"`
	// NextNoticeID and NoticesDropped are the outbox's counters (mail.go).
	NextNoticeID   uint64 `json:"next_notice_id,omitempty"`
	NoticesDropped uint64 `json:"notices_dropped,omitempty"`
}

// snapshotRecord is one line of a snapshot after the header; exactly one
// field is set.
type snapshotRecord struct {
	// Blob records come first (texts, then environments), so that the
	// jobs after them find the blobs they name.
	Blob  *BlobRecord `json:"blob,omitempty"`
	Job   *Job        `json:"job,omitempty"`
	Alloc *Allocation `json:"alloc,omitempty"`
	// Migration records come after the allocations.
	Migration  *migrate.Migration `json:"migration,omitempty"`
	Node       *Node              `json:"node,omitempty"`
	Request    *requestRecord     `json:"request,omitempty"`
	RequestGen *requestGenRecord  `json:"request_gen,omitempty"`
	Member     *memberRecord      `json:"member,omitempty"`
	// Audit records come after the members, oldest first.
	Audit *AuditRecord `json:"audit,omitempty"`
	// Notice records (the outbox) come after the audit records, by id.
	Notice *Notice `json:"notice,omitempty"`
	// Policy holds the scheduler configuration, QoS, accounts, users and
	// usage: one record, written once.
	Policy *policyRecord `json:"policy,omitempty"`
}

// memberRecord is one controller member's HTTP address.
type memberRecord struct {
	ID       string `json:"id"`
	HTTPAddr string `json:"http_addr"`
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
	// Partitions and Seeded are the configured partitions and whether
	// the cluster was seeded (format 3).
	Partitions []api.Partition `json:"partitions,omitempty"`
	Seeded     bool            `json:"seeded,omitempty"`
	// Tokens and Roles are the tokens and role grants, by id and user.
	Tokens []TokenRecord   `json:"tokens,omitempty"`
	Roles  []api.RoleGrant `json:"roles,omitempty"`
	// AuditHeads end the audit chains, by tenant.
	AuditHeads map[string]AuditHead `json:"audit_heads,omitempty"`
	// Attestations are the nodes' last TPM attestations.
	Attestations map[string]*Attestation `json:"attestations,omitempty"`
	// Reservations are the advance reservations, by name.
	Reservations []api.Reservation `json:"reservations,omitempty"`
}

type usageRecord struct {
	UserKey
	Usage
}

// policyOf copies the policy part of s, sorted so snapshots are stable.
func policyOf(s *State) *policyRecord {
	p := &policyRecord{Config: s.Config, Seeded: s.Seeded}
	for _, id := range sortedKeys(s.Tokens) {
		p.Tokens = append(p.Tokens, *s.Tokens[id])
	}
	for _, u := range sortedKeys(s.Roles) {
		p.Roles = append(p.Roles, *s.Roles[u])
	}
	if len(s.auditHeads) > 0 {
		p.AuditHeads = s.AuditHeads()
	}
	if len(s.Attestations) > 0 {
		p.Attestations = maps.Clone(s.Attestations)
	}
	for _, n := range sortedKeys(s.Partitions) {
		p.Partitions = append(p.Partitions, *s.Partitions[n])
	}
	for _, n := range sortedKeys(s.Reservations) {
		p.Reservations = append(p.Reservations, *s.Reservations[n])
	}
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
	for i := range p.Partitions {
		s.Partitions[p.Partitions[i].Name] = &p.Partitions[i]
	}
	for i := range p.Reservations {
		s.Reservations[p.Reservations[i].Name] = &p.Reservations[i]
	}
	s.Seeded = p.Seeded
	for i := range p.Users {
		u := &p.Users[i]
		s.Users[UserKey{Account: u.Account, User: u.Name}] = u
	}
	for _, u := range p.Usage {
		s.Usage[u.UserKey] = u.Usage
	}
	for i := range p.Tokens {
		s.Tokens[p.Tokens[i].ID] = &p.Tokens[i]
	}
	for i := range p.Roles {
		s.Roles[p.Roles[i].User] = &p.Roles[i]
	}
	for t, h := range p.AuditHeads {
		s.auditHeads[t] = h
	}
	for n, a := range p.Attestations {
		s.Attestations[n] = a
	}
}

// Snapshot is an immutable view of a State: the controller takes it under
// its read lock and writes it later, while entries keep being applied.
// Copying the maps of pointers is enough: the records are never mutated.
type Snapshot struct {
	header     snapshotHeader
	policy     *policyRecord
	blobs      []BlobRecord
	jobs       []*Job
	allocs     []*Allocation
	migrations []*migrate.Migration
	nodes      []*Node
	requests   *RequestIDs
	members    map[string]string
	// audit shares the state's array: the apply only appends past its
	// length, and forgetting copies.
	audit   []AuditRecord
	notices []*Notice
}

// Snapshot captures the state as it is now.
func (s *State) Snapshot() *Snapshot {
	snap := &Snapshot{
		header: snapshotHeader{Format: snapshotFormat, Index: s.Index, NextJobID: s.NextJobID, NextAllocID: s.NextAllocID,
			NextMigrationID: s.NextMigrationID, NextNoticeID: s.NextNoticeID, NoticesDropped: s.NoticesDropped},
		jobs:     make([]*Job, 0, len(s.Jobs)),
		allocs:   make([]*Allocation, 0, len(s.Allocs)),
		nodes:    make([]*Node, 0, len(s.Nodes)),
		requests: s.Requests.clone(),
		policy:   policyOf(s),
		members:  maps.Clone(s.Members),
		blobs:    s.blobRecords(),
		audit:    s.Audit[:len(s.Audit):len(s.Audit)],
	}
	for _, id := range slices.Sorted(maps.Keys(s.Jobs)) {
		snap.jobs = append(snap.jobs, s.Jobs[id])
	}
	for _, id := range slices.Sorted(maps.Keys(s.Allocs)) {
		snap.allocs = append(snap.allocs, s.Allocs[id])
	}
	for _, id := range slices.Sorted(maps.Keys(s.Migrations)) {
		snap.migrations = append(snap.migrations, s.Migrations[id])
	}
	for _, name := range sortedKeys(s.Nodes) {
		snap.nodes = append(snap.nodes, s.Nodes[name])
	}
	for _, id := range slices.Sorted(maps.Keys(s.Notices)) {
		snap.notices = append(snap.notices, s.Notices[id])
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
	for i := range s.blobs {
		if err := enc.Encode(snapshotRecord{Blob: &s.blobs[i]}); err != nil {
			return err
		}
	}
	for _, j := range s.jobs {
		if err := enc.Encode(snapshotRecord{Job: j}); err != nil {
			return err
		}
	}
	for _, a := range s.allocs {
		if err := enc.Encode(snapshotRecord{Alloc: a}); err != nil {
			return err
		}
	}
	for _, m := range s.migrations {
		if err := enc.Encode(snapshotRecord{Migration: m}); err != nil {
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
		if err := enc.Encode(snapshotRecord{Member: &memberRecord{ID: id, HTTPAddr: s.members[id]}}); err != nil {
			return err
		}
	}
	for i := range s.audit {
		if err := enc.Encode(snapshotRecord{Audit: &s.audit[i]}); err != nil {
			return err
		}
	}
	for _, n := range s.notices {
		if err := enc.Encode(snapshotRecord{Notice: n}); err != nil {
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

// ReadSnapshot reads a snapshot written by Write, or by an older build in
// format 1 or 2, into a new State. A record of no known kind, or with a
// field this build does not know, is an error: a state that silently lost
// part of itself would diverge from its peers.
func ReadSnapshot(r io.Reader) (*State, error) {
	dec := json.NewDecoder(bufio.NewReaderSize(r, 1<<20))
	dec.DisallowUnknownFields()
	var h snapshotHeader
	if err := dec.Decode(&h); err != nil {
		return nil, fmt.Errorf("reading snapshot header: %w", err)
	}
	s := New()
	s.Index, s.NextJobID, s.NextAllocID = h.Index, h.NextJobID, max(h.NextAllocID, 1)
	s.NextMigrationID = h.NextMigrationID
	s.NextNoticeID, s.NoticesDropped = h.NextNoticeID, h.NoticesDropped
	switch h.Format {
	case snapshotFormat:
		if err := s.readRecords(dec); err != nil {
			return nil, err
		}
		s.tidyNodeNames()
		s.partitionList = s.buildPartitionList()
		return s, nil
	case 1, 2:
		if err := s.readLegacyRecords(dec, h.Format); err != nil {
			return nil, err
		}
		s.tidyNodeNames()
		s.partitionList = s.buildPartitionList()
		return s, nil
	}
	return nil, fmt.Errorf("snapshot format %d is not supported (this build reads formats 1 to %d)", h.Format, snapshotFormat)
}

// readRecords reads the records of a format-3 snapshot. Its blobs are
// kept as they are read and forgotten at the end if no job took them.
func (s *State) readRecords(dec *json.Decoder) error {
	var gen *requestGen
	var made []*Blob
	for line := 2; ; line++ {
		var rec snapshotRecord
		err := dec.Decode(&rec)
		if errors.Is(err, io.EOF) {
			s.dropUnused(made)
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading snapshot record %d: %w", line, err)
		}
		switch {
		case rec.Blob != nil:
			k, err := parseBlobKey(rec.Blob.Key)
			if err != nil || s.blobFrom(k, map[blobKey]*BlobRecord{k: rec.Blob}, &made) == nil {
				return fmt.Errorf("reading snapshot record %d: blob %s does not match its content or names a blob not read before it", line, rec.Blob.Key)
			}
		case rec.Job != nil:
			if rec.Job.Spec == nil {
				rec.Job.Spec = &JobSpec{} // a record written with no spec asked for nothing
			}
			if err := s.resolveBlobs(rec.Job.Spec, nil); err != nil {
				return fmt.Errorf("reading snapshot record %d: job %d: %w", line, rec.Job.ID, err)
			}
			s.internSpec(rec.Job.Spec)
			s.putJob(rec.Job)
		case rec.Alloc != nil:
			rec.Alloc.Node = s.intern(rec.Alloc.Node)
			s.Allocs[rec.Alloc.ID] = rec.Alloc
		case rec.Migration != nil:
			m := rec.Migration
			m.From, m.To, m.Want = s.intern(m.From), s.intern(m.To), s.intern(m.Want)
			s.Migrations[m.ID] = m
		case rec.Node != nil:
			rec.Node.Name = s.intern(rec.Node.Name)
			s.Nodes[rec.Node.Name] = rec.Node
		case rec.Audit != nil:
			s.Audit = append(s.Audit, *rec.Audit)
		case rec.Notice != nil:
			if s.Notices == nil {
				s.Notices = make(map[uint64]*Notice)
			}
			s.Notices[rec.Notice.ID] = rec.Notice
		case rec.RequestGen != nil:
			gen = s.Requests.newGen(rec.RequestGen.First, rec.RequestGen.Last)
		case rec.Request != nil:
			if gen == nil {
				return fmt.Errorf("reading snapshot: request id %q of user %q comes before any request generation", rec.Request.Key, rec.Request.User)
			}
			gen.put(rec.Request.User, rec.Request.Key, rec.Request.Job)
		case rec.Member != nil:
			s.Members[rec.Member.ID] = rec.Member.HTTPAddr
		case rec.Policy != nil:
			restorePolicy(s, rec.Policy)
		default:
			return fmt.Errorf("reading snapshot: record %d is of no kind this build knows (blob, job, alloc, migration, node, request, request_gen, member, audit, notice, policy)", line)
		}
	}
}
