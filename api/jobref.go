package api

import (
	"fmt"
	"strconv"
	"strings"
)

// JobRef is a job as a user names it: "12" (a job, or a whole array) or
// "12_5" (one task of array 12).
type JobRef struct {
	ID   uint64
	Task int
	// HasTask is set for the "12_5" form.
	HasTask bool
}

// ParseJobRef reads "12" or "12_5".
func ParseJobRef(s string) (JobRef, error) {
	base, task, hasTask := strings.Cut(s, "_")
	id, err := strconv.ParseUint(base, 10, 64)
	if err != nil || id == 0 {
		return JobRef{}, fmt.Errorf("%q is not a job id: use ID or ARRAYID_TASK, e.g. 12 or 12_5", s)
	}
	r := JobRef{ID: id, HasTask: hasTask}
	if hasTask {
		n, err := strconv.Atoi(task)
		if err != nil || n < 0 {
			return JobRef{}, fmt.Errorf("array task %q in %q is not a number: use ARRAYID_TASK, e.g. 12_5", task, s)
		}
		r.Task = n
	}
	return r, nil
}
