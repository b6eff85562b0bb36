package state

import (
	"fmt"
	"time"

	"corral/api"
)

// AuditRecord and AuditHead are the API's (api/audit.go): the state keeps
// the records as the API shows them.
type (
	AuditRecord = api.AuditRecord
	AuditHead   = api.AuditHead
)

// AuditRecords appends records, chained by the leader from the heads it
// read, and forgets the records older than Retention or beyond the Keep
// newest.
type AuditRecords struct {
	Now       time.Time     `json:"now"`
	Records   []AuditRecord `json:"records"`
	Keep      int           `json:"keep"`
	Retention time.Duration `json:"retention"`
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
		case api.AuditHash(r) != r.Hash:
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
