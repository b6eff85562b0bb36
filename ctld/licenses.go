package ctld

import (
	"net/http"

	"corral/api"
	"corral/ctld/state"
)

// licensesInUse sums the licenses the jobs of active allocations hold
// (suspended ones keep theirs), as the pass counts them.
func licensesInUse(s *state.State) map[string]int {
	used := map[string]int{}
	for _, name := range s.NodeNames() {
		for _, id := range s.Nodes[name].Allocs {
			a := s.Allocs[id]
			if a == nil || !a.Active() {
				continue
			}
			if j := s.Jobs[a.Job]; j != nil {
				for _, l := range j.Spec.Licenses {
					used[l.Name] += l.Count
				}
			}
		}
	}
	return used
}

// handleLicenses answers scontrol show lic: each of the cluster's
// licenses, its total and what running jobs hold.
func (c *Controller) handleLicenses(w http.ResponseWriter, r *http.Request) error {
	var out []api.LicenseUse
	c.fsm.Read(func(s *state.State) {
		used := licensesInUse(s)
		for _, l := range s.Config.Licenses {
			out = append(out, api.LicenseUse{Name: l.Name, Total: l.Count, Used: used[l.Name]})
		}
	})
	if out == nil {
		out = []api.LicenseUse{}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
