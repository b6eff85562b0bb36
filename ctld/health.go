package ctld

import (
	"strings"

	"corral/api"
	"corral/ctld/state"
)

// takeHealth follows a node's health check (noded --health-check, Slurm's
// HealthCheckProgram): a failing check drains the node with the check's
// output as the reason; a passing one resumes it only when the check
// drained it. A node drained by an operator stays drained either way (the
// apply decides that, on the state as it then is). Only a change is
// proposed: a node that keeps failing, or passing, costs no entry.
func (c *Controller) takeHealth(node string, h *api.HealthReport) error {
	reason := "health check failed"
	if out := strings.TrimSpace(h.Output); out != "" {
		reason += ": " + out
	}
	var change bool
	c.fsm.Read(func(s *state.State) {
		n := s.Nodes[node]
		if n == nil {
			return
		}
		byHealth := n.Drain && n.ReasonUser == api.HealthCheckUser
		change = !h.OK && (!n.Drain || byHealth && n.Reason != reason) || h.OK && byHealth
	})
	if !change {
		return nil
	}
	if !h.OK {
		c.log.Warn("draining a node: its health check failed", "node", node, "output", h.Output)
	} else {
		c.log.Info("resuming a node its health check had drained: the check passes", "node", node)
	}
	_, err := c.propose(state.CmdNodeDrain, &state.NodeDrain{Now: c.clock.Now().UTC(), Node: node, Drain: !h.OK,
		Reason: reason, By: api.HealthCheckUser, Health: true})
	return err
}
