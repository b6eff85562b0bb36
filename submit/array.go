package submit

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"corral/api"
)

const arrayForms = "use comma-separated indices and FIRST-LAST[:STEP] ranges with an optional %LIMIT, e.g. --array=0-15:4%2 or --array=1,3,5-7"

// ParseArray parses a Slurm --array expression: a comma-separated list of
// indices and FIRST-LAST[:STEP] ranges, optionally followed by %N, the most
// tasks that may run at once (%0 means no limit, as in Slurm). Indices run
// from 0 to MaxArrayIndex; a range's step must be positive and its last index
// not below its first.
func ParseArray(s string) (*api.ArraySpec, error) {
	bad := func(why string) error {
		return optionError("--array", s, nil, "%s (%s)", why, arrayForms)
	}
	if s == "" {
		return nil, bad("empty array expression")
	}
	list, throttle, hasThrottle := strings.Cut(s, "%")
	spec := &api.ArraySpec{Raw: s}
	if hasThrottle {
		n, err := arrayNumber(throttle)
		if err != nil {
			return nil, bad(fmt.Sprintf("task limit %q after %% is not a whole number", throttle))
		}
		spec.Throttle = n
	}
	if list == "" {
		return nil, bad("no indices before %")
	}
	for _, item := range strings.Split(list, ",") {
		r, why := parseArrayRange(item)
		if why != "" {
			return nil, bad(why)
		}
		spec.Ranges = append(spec.Ranges, r)
	}
	return spec, nil
}

func parseArrayRange(item string) (api.ArrayRange, string) {
	if item == "" {
		return api.ArrayRange{}, "empty entry in the list"
	}
	bounds, stepText, hasStep := strings.Cut(item, ":")
	firstText, lastText, isRange := strings.Cut(bounds, "-")
	if hasStep && !isRange {
		return api.ArrayRange{}, fmt.Sprintf("%q: a :STEP needs a FIRST-LAST range", item)
	}
	first, err := arrayNumber(firstText)
	if err != nil {
		return api.ArrayRange{}, fmt.Sprintf("%q: index %q is not a whole number", item, firstText)
	}
	r := api.ArrayRange{First: first, Last: first, Step: 1}
	if isRange {
		if r.Last, err = arrayNumber(lastText); err != nil {
			return api.ArrayRange{}, fmt.Sprintf("%q: index %q is not a whole number", item, lastText)
		}
	}
	if hasStep {
		step, err := strconv.Atoi(stepText)
		if err != nil {
			return api.ArrayRange{}, fmt.Sprintf("%q: step %q is not a whole number", item, stepText)
		}
		if step <= 0 {
			return api.ArrayRange{}, fmt.Sprintf("%q: step must be at least 1", item)
		}
		r.Step = step
	}
	switch {
	case r.Last < r.First:
		return api.ArrayRange{}, fmt.Sprintf("%q: last index %d is below first index %d", item, r.Last, r.First)
	case r.Last > MaxArrayIndex:
		return api.ArrayRange{}, fmt.Sprintf("%q: index %d is above the largest allowed, %d", item, r.Last, MaxArrayIndex)
	}
	return r, ""
}

// arrayNumber parses a non-negative decimal number without a sign; a number
// too large for an int comes back as math.MaxInt, so the range checks
// report it as too large rather than as malformed.
func arrayNumber(s string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, strconv.ErrSyntax
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return math.MaxInt, nil
	}
	return n, nil
}
