package ctld

import (
	"testing"

	"corral/api"
)

// TestRegistrationDropsInvalidCarriedReports checks that a registration is
// not refused for a report it carries (the daemon would retry with it
// forever): the invalid reports are dropped, the valid ones kept.
func TestRegistrationDropsInvalidCarriedReports(t *testing.T) {
	good := api.JobReport{JobID: 1, StartIndex: 3, State: api.StateFailed, ExitCode: 7}
	kept, dropped := validCarriedReports([]api.JobReport{
		good,
		{JobID: 2, StartIndex: 3, State: api.StateRunning},
		{JobID: 3, StartIndex: 3, State: api.StateCompleted, ExitCode: 999},
		{JobID: 0, State: api.StateCompleted},
	})
	if len(kept) != 1 || kept[0] != good {
		t.Errorf("kept %+v, want only job 1's report", kept)
	}
	if len(dropped) != 3 {
		t.Errorf("dropped %d reports (%v), want 3", len(dropped), dropped)
	}
}
