package state

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"time"
)

// AuditRecord is one state-changing request, accepted or refused: who
// asked, for what, and how it ended. Records are chained per tenant: each
// names the hash of the one before it in its tenant (Prev) and carries its
// own (Hash), so a record altered or removed from a copy of the state is
// detected (VerifyAudit).
type AuditRecord struct {
	// Tenant is the chain the record is in: the caller's tenant, "" for
	// callers of no tenant (admins, operators, nodes, anonymous ones).
	Tenant string `json:"tenant,omitempty"`
	// Seq is the record's place in its tenant's chain, from 1.
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
	Principal string    `json:"principal"`
	// User is the principal's user, node or member name, for filtering.
	User string `json:"user,omitempty"`
	// Op is the endpoint ("POST /v1/jobs/cancel"), Target what it named
	// ("jobs 12,13").
	Op     string `json:"op"`
	Target string `json:"target,omitempty"`
	// Status is the HTTP answer; Message the refusal's text, clipped.
	Status    int    `json:"status"`
	Message   string `json:"message,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	Prev      string `json:"prev,omitempty"`
	Hash      string `json:"hash"`
}

// AuditHead is the end of a tenant's chain.
type AuditHead struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
}

// AuditRecords appends records, chained by the leader from the heads it
// read, and forgets the records older than Retention or beyond the Keep
// newest.
type AuditRecords struct {
	Now       time.Time     `json:"now"`
	Records   []AuditRecord `json:"records"`
	Keep      int           `json:"keep"`
	Retention time.Duration `json:"retention"`
}

// AuditHash is the hash a record must carry: SHA-256 over its content
// with Hash empty, Prev included.
func AuditHash(r AuditRecord) string {
	r.Hash = ""
	b, _ := json.Marshal(r) // a record of strings, numbers and a time always encodes
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ChainAudit gives records their places, Prev and Hash, continuing the
// chains from heads (which it advances): what the leader does before it
// proposes them.
func ChainAudit(heads map[string]AuditHead, records []AuditRecord) {
	for i := range records {
		r := &records[i]
		h := heads[r.Tenant]
		r.Seq, r.Prev = h.Seq+1, h.Hash
		r.Hash = AuditHash(*r)
		heads[r.Tenant] = AuditHead{Seq: r.Seq, Hash: r.Hash}
	}
}

// AuditHeads returns a copy of the chains' heads.
func (s *State) AuditHeads() map[string]AuditHead {
	out := make(map[string]AuditHead, len(s.auditHeads))
	for k, v := range s.auditHeads {
		out[k] = v
	}
	return out
}

// applyAudit appends c's records if each continues its chain, and none
// otherwise (the leader chained them from heads that moved meanwhile, or
// the entry was altered): the result says which broke.
func (s *State) applyAudit(c *AuditRecords) error {
	heads := s.AuditHeads()
	for i, r := range c.Records {
		h := heads[r.Tenant]
		switch {
		case r.Seq != h.Seq+1 || r.Prev != h.Hash:
			return fmt.Errorf("audit record %d of the entry (tenant %q, seq %d) does not continue its chain at seq %d; chain the records again from the current heads", i+1, r.Tenant, r.Seq, h.Seq)
		case AuditHash(r) != r.Hash:
			return fmt.Errorf("audit record %d of the entry (tenant %q, seq %d) does not match its hash", i+1, r.Tenant, r.Seq)
		}
		heads[r.Tenant] = AuditHead{Seq: r.Seq, Hash: r.Hash}
	}
	s.Audit = append(s.Audit, c.Records...)
	s.auditHeads = heads
	s.forgetAudit(c.Now, c.Keep, c.Retention)
	return nil
}

// forgetAudit drops the oldest records: those older than retention (when
// set) and those beyond the keep newest (when set). The heads stay, so a
// chain goes on where it was.
func (s *State) forgetAudit(now time.Time, keep int, retention time.Duration) {
	drop := 0
	if keep > 0 && len(s.Audit) > keep {
		drop = len(s.Audit) - keep
	}
	if retention > 0 {
		cut := now.Add(-retention)
		for drop < len(s.Audit) && s.Audit[drop].Time.Before(cut) {
			drop++
		}
	}
	if drop == 0 {
		return
	}
	// A new array: snapshots taken before share the old one.
	s.Audit = append([]AuditRecord(nil), s.Audit[drop:]...)
}

// VerifyAudit checks records (any order) chain by chain: each record's
// hash matches its content and names the one before it in its tenant,
// with no gap. The first record kept of a chain is trusted for its Prev
// (older ones may have been forgotten); heads, when given, must be where
// each chain ends. It returns every problem found.
func VerifyAudit(records []AuditRecord, heads map[string]AuditHead) []error {
	byTenant := map[string][]AuditRecord{}
	for _, r := range records {
		byTenant[r.Tenant] = append(byTenant[r.Tenant], r)
	}
	var errs []error
	tenants := make([]string, 0, len(byTenant))
	for t := range byTenant {
		tenants = append(tenants, t)
	}
	sort.Strings(tenants)
	for _, t := range tenants {
		rs := byTenant[t]
		sort.Slice(rs, func(a, b int) bool { return rs[a].Seq < rs[b].Seq })
		for i, r := range rs {
			if AuditHash(r) != r.Hash {
				errs = append(errs, fmt.Errorf("tenant %q, record %d (%s %s by %s): its content does not match its hash: it was altered", t, r.Seq, r.Time.UTC().Format(time.RFC3339), r.Op, r.Principal))
			}
			if i > 0 && (r.Seq != rs[i-1].Seq+1 || r.Prev != rs[i-1].Hash) {
				errs = append(errs, fmt.Errorf("tenant %q, record %d: it does not follow record %d: records between them were removed or altered", t, r.Seq, rs[i-1].Seq))
			}
		}
		if h, ok := heads[t]; ok && (len(rs) == 0 || rs[len(rs)-1].Seq != h.Seq || rs[len(rs)-1].Hash != h.Hash) {
			errs = append(errs, fmt.Errorf("tenant %q: the chain ends at record %d, but its head is record %d: the newest records were removed", t, rs[len(rs)-1].Seq, h.Seq))
		}
	}
	return errs
}
