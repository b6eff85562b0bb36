package ctld

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"corral/internal/pki"
	"corral/submit"
)

// A member joins a running cluster: started with --join URL[,URL] (the
// API of members it may ask) and no --peers, it starts Raft without
// bootstrapping a cluster of its own and asks a member to add it (POST
// /v1/internal/members/join, which a follower forwards to the leader). The
// leader adds it as a voter (raft.AddVoter); Raft then sends it the
// leader's snapshot and the log after it, and its accounting store, behind
// that snapshot, copies the records of the jobs purged before it from a
// peer (acctsync.go), so that it answers sacct with the whole history. A
// joined member restarted later finds itself in the configuration and asks
// nothing. Under TLS only a member certificate of the cluster's authority,
// named as the member, may ask (the access rule "members").

// memberJoin is the body of POST /v1/internal/members/join.
type memberJoin struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
}

// joinTimeout bounds the leader's wait for the configuration change.
const joinTimeout = 30 * time.Second

// handleMemberJoin adds the member that asks as a voter; asking again
// with the same address changes nothing.
func (c *Controller) handleMemberJoin(w http.ResponseWriter, r *http.Request) error {
	var m memberJoin
	if err := decode(r, &m); err != nil {
		return err
	}
	if why := submit.NameProblem(m.ID, submit.MaxNameBytes); why != "" {
		return &fieldError{Field: "id", Msg: fmt.Sprintf("member id %q %s", submit.Shown(m.ID), why)}
	}
	if err := checkRaftAddr(m.RaftAddr); err != nil {
		return err
	}
	if id, ok := c.caller(r); c.tls != nil && (!ok || id.Role != pki.RoleMember || id.Name != m.ID) {
		return &httpError{status: http.StatusForbidden, field: "id", msg: fmt.Sprintf("member %s may ask to join only with its own certificate (corral ca issue --role member --name %s)", submit.Shown(m.ID), submit.Shown(m.ID))}
	}
	f := c.node.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("reading the Raft configuration: %w", err)
	}
	for _, s := range f.Configuration().Servers {
		switch {
		case string(s.ID) == m.ID && string(s.Address) == m.RaftAddr:
			writeJSON(w, http.StatusOK, struct{}{}) // a retry after an answer that was lost
			return nil
		case string(s.ID) == m.ID:
			return &httpError{status: http.StatusConflict, field: "id", msg: fmt.Sprintf("member %s is in the cluster already, at %s: give the new member another --id, or start it at that Raft address", m.ID, s.Address)}
		case string(s.Address) == m.RaftAddr:
			return &httpError{status: http.StatusConflict, field: "raft_addr", msg: fmt.Sprintf("raft_addr %s is member %s's: give the new member its own --raft address", m.RaftAddr, s.ID)}
		}
	}
	if err := c.node.raft.AddVoter(raft.ServerID(m.ID), raft.ServerAddress(m.RaftAddr), 0, joinTimeout).Error(); err != nil {
		return &httpError{status: http.StatusServiceUnavailable, msg: fmt.Sprintf("adding member %s at %s: %v; it asks again", m.ID, m.RaftAddr, err)}
	}
	c.log.Info("added a controller member", "member", m.ID, "raft", m.RaftAddr)
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

// checkRaftAddr refuses a Raft address that is not HOST:PORT.
func checkRaftAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	n, perr := strconv.Atoi(port)
	if err != nil || perr != nil || n < 1 || n > 65535 || host == "" || submit.TextProblem(addr, submit.MaxNameBytes) != "" || strings.ContainsAny(addr, " /") {
		return &fieldError{Field: "raft_addr", Msg: fmt.Sprintf("raft_addr %q must be HOST:PORT, the new member's --raft address", submit.Shown(addr))}
	}
	return nil
}

// isVoter reports whether this member is in the Raft configuration.
func (c *Controller) isVoter() bool {
	f := c.node.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == c.cfg.ID {
			return true
		}
	}
	return false
}

// joinCluster asks the members of cfg.Join, in turn, to add this member,
// until one did or it finds itself in the configuration, waiting longer
// after each round that failed.
func (c *Controller) joinCluster(ctx context.Context) {
	if len(c.cfg.Join) == 0 {
		return
	}
	wait := 500 * time.Millisecond
	for ctx.Err() == nil {
		if c.isVoter() {
			return
		}
		for _, base := range c.cfg.Join {
			err := c.askToJoin(ctx, base)
			if err == nil {
				c.log.Info("joined the cluster", "asked", base)
				return
			}
			c.log.Warn("asking a member to add this one failed; trying another", "member", base, "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, 10*time.Second)
	}
}

// askToJoin sends the join request to the member at base (a URL, or
// HOST:PORT of its API).
func (c *Controller) askToJoin(ctx context.Context, base string) error {
	if !strings.Contains(base, "://") {
		base = c.scheme() + "://" + base
	}
	body, _ := json.Marshal(memberJoin{ID: c.cfg.ID, RaftAddr: c.cfg.RaftAddr})
	rctx, cancel := context.WithTimeout(ctx, joinTimeout+5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, strings.TrimSuffix(base, "/")+"/v1/internal/members/join", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.proxy.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return errors.New(resp.Status + ": " + strings.TrimSpace(string(msg)))
	}
	return nil
}
