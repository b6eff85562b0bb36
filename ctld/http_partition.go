package ctld

import (
	"fmt"
	"net/http"

	"corral/api"
	"corral/ctld/state"
	"corral/submit"
)

// handlePartition adds, changes or deletes a partition (corral partition
// add|modify|delete, scontrol update PartitionName=...). The leader applies
// the request's settings to the partition as it stands and proposes the
// whole of it; the apply checks it again against the state it applies to.
func (c *Controller) handlePartition(w http.ResponseWriter, r *http.Request) error {
	var req api.PartitionRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := validatePartitionRequest(&req); err != nil {
		return err
	}
	var p api.Partition
	var err error
	c.fsm.Read(func(s *state.State) {
		cur := s.Partitions[req.Name]
		switch {
		case req.Create && cur != nil:
			err = badRequest("partition %s exists already; change it with corral partition modify %s", req.Name, req.Name)
		case !req.Create && !req.Delete && cur == nil:
			err = notFound("partition %s: no such partition; add it with corral partition add %s", req.Name, req.Name)
		case cur != nil:
			p = *cur
		default:
			p = api.Partition{Name: req.Name}
		}
	})
	if err != nil {
		return err
	}
	for _, kv := range req.Settings {
		if err := p.Set(kv[0], kv[1], submit.ParseTimeLimit); err != nil {
			return &fieldError{Field: "settings", Msg: fmt.Sprintf("partition %s: %v", req.Name, err)}
		}
	}
	cmd := &state.PutPartition{Partition: p, Delete: req.Delete, By: principalFrom(r).name}
	if err := c.proposePolicy(state.CmdPutPartition, cmd, func(s *state.State) error {
		q := p
		return s.CheckPartition(&q, req.Delete)
	}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

// validatePartitionRequest checks a partition request's name and the
// number and size of its settings.
func validatePartitionRequest(req *api.PartitionRequest) error {
	c := &reqCheck{}
	c.name("name", req.Name, submit.MaxNameBytes)
	c.count("settings", len(req.Settings), 64)
	for _, kv := range req.Settings {
		c.text("settings", kv[0], 64)
		c.text("settings", kv[1], 64<<10)
	}
	if req.Create && req.Delete {
		c.fail("delete", "a request cannot both create and delete a partition")
	}
	return c.err
}
