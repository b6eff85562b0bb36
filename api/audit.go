package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
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

// AuditView is what GET /v1/audit answers: the records asked for, oldest
// first, and the heads of the chains the caller may read.
type AuditView struct {
	Records []AuditRecord        `json:"records"`
	Heads   map[string]AuditHead `json:"heads"`
}

// AuditFilter chooses the records GET /v1/audit returns.
type AuditFilter struct {
	Tenants, Users []string
	Since          time.Time
	Limit          int
}

// Audit returns the audit records f chooses that the caller may read.
func (c *Client) Audit(ctx context.Context, f AuditFilter) (*AuditView, error) {
	q := url.Values{}
	for _, t := range f.Tenants {
		q.Add("tenant", t)
	}
	for _, u := range f.Users {
		q.Add("user", u)
	}
	if !f.Since.IsZero() {
		q.Set("since", f.Since.UTC().Format(time.RFC3339))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var v AuditView
	return &v, c.do(ctx, http.MethodGet, "/v1/audit?"+q.Encode(), nil, &v)
}
