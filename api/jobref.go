package api

import (
	"fmt"
	"strconv"
	"strings"
)

// JobRef is a job as a user names it: "12" (a job, or a whole array) or
// "12_5" (one task of array 12). ParseJobRef is the one place such a
// reference is read: the CLI, the request validation, the dependency
// parser and the controller all call it.
type JobRef struct {
	ID   uint64
	Task int
	// HasTask is set for the "12_5" form.
	HasTask bool
}

// String writes the reference as users do.
func (r JobRef) String() string {
	if r.HasTask {
		return strconv.FormatUint(r.ID, 10) + "_" + strconv.Itoa(r.Task)
	}
	return strconv.FormatUint(r.ID, 10)
}

// RecordRef returns how users name a job record: "12" for a plain job,
// "12_5" for task 5 of array 12 (arrayJobID 12, task 5), "12_[3-99%10]"
// for array 12's unstarted tasks (pending, with array's throttle). The
// API's job and the controllers' record both name themselves with it.
func RecordRef(id, arrayJobID uint64, task int, pending *IndexSet, array *ArraySpec) string {
	switch {
	case pending != nil:
		s := strconv.FormatUint(id, 10) + "_[" + pending.String()
		if array != nil && array.Throttle > 0 {
			s += "%" + strconv.Itoa(array.Throttle)
		}
		return s + "]"
	case arrayJobID != 0:
		return JobRef{ID: arrayJobID, Task: task, HasTask: true}.String()
	}
	return strconv.FormatUint(id, 10)
}

// ParseJobRef reads "12" or "12_5": a positive decimal job id, optionally
// with an array task index, digits only (no sign, no spaces).
func ParseJobRef(s string) (JobRef, error) {
	base, task, hasTask := strings.Cut(s, "_")
	id, err := strconv.ParseUint(base, 10, 64)
	if err != nil || id == 0 || !digits(base) {
		return JobRef{}, fmt.Errorf("%q is not a job id: use ID or ARRAYID_TASK, e.g. 12 or 12_5", s)
	}
	r := JobRef{ID: id, HasTask: hasTask}
	if hasTask {
		n, err := strconv.ParseUint(task, 10, 31)
		if err != nil || !digits(task) {
			return JobRef{}, fmt.Errorf("array task %q in %q is not a number: use ARRAYID_TASK, e.g. 12_5", task, s)
		}
		r.Task = int(n)
	}
	return r, nil
}

func digits(s string) bool { return s != "" && strings.TrimLeft(s, "0123456789") == "" }
