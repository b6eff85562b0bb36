package submit

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// maxTimeField bounds each number in a time limit so the total cannot
// overflow; it is far above any real limit (about 2700 years in minutes).
const maxTimeField = 1_000_000_000

// ParseTimeLimit parses a Slurm --time value into seconds. The forms are
// Slurm's: "M", "M:S", "H:M:S", "D-H", "D-H:M" and "D-H:M:S"; "UNLIMITED"
// and "INFINITE" (any case) give 0, which JobSpec reads as "no limit of
// the job's own". Fields are not range-checked beyond being whole numbers,
// as in Slurm ("90" and "0:90:00" are both ninety minutes).
func ParseTimeLimit(s string) (int64, error) {
	if strings.EqualFold(s, "UNLIMITED") || strings.EqualFold(s, "INFINITE") {
		return 0, nil
	}
	bad := func(cause error, why string) error {
		return optionError("--time", s, cause,
			"%s (use minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S or UNLIMITED, e.g. --time=1:30:00)", why)
	}
	if s == "" {
		return 0, bad(nil, "empty time limit")
	}
	days := int64(0)
	clock := s
	hasDays := false
	if d, rest, ok := strings.Cut(s, "-"); ok {
		if d == "" || strings.Contains(d, ":") {
			return 0, bad(nil, "a time limit cannot be negative; '-' only separates days from hours")
		}
		n, err := timeField(d)
		if err != nil {
			return 0, bad(err, fieldProblem("days "+strconv.Quote(d), err))
		}
		days, clock, hasDays = n, rest, true
	}
	parts := strings.Split(clock, ":")
	nums := make([]int64, len(parts))
	for i, p := range parts {
		n, err := timeField(p)
		if err != nil {
			return 0, bad(err, fieldProblem(strconv.Quote(p), err))
		}
		nums[i] = n
	}
	var h, m, sec int64
	switch {
	case hasDays && len(nums) == 1: // D-H
		h = nums[0]
	case hasDays && len(nums) == 2: // D-H:M
		h, m = nums[0], nums[1]
	case len(nums) == 1: // M
		m = nums[0]
	case len(nums) == 2: // M:S
		m, sec = nums[0], nums[1]
	case len(nums) == 3: // H:M:S and D-H:M:S
		h, m, sec = nums[0], nums[1], nums[2]
	default:
		return 0, bad(nil, "too many fields")
	}
	return ((days*24+h)*60+m)*60 + sec, nil
}

// fieldProblem says what is wrong with a time-limit field that timeField
// refused: not a number, or a number too large.
func fieldProblem(what string, err error) string {
	if errors.Is(err, strconv.ErrRange) {
		return fmt.Sprintf("%s is too large: each field is at most %d", what, maxTimeField)
	}
	return what + " is not a whole number"
}

// timeField parses one non-negative field of a time limit.
func timeField(s string) (int64, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, strconv.ErrSyntax
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > maxTimeField {
		return 0, strconv.ErrRange
	}
	return n, nil
}

// FormatDuration renders seconds the way squeue shows elapsed time (%M):
// "M:SS" under an hour, "H:MM:SS" under a day, "D-HH:MM:SS" beyond.
// A negative duration is "INVALID", as in Slurm.
func FormatDuration(seconds int64) string {
	if seconds < 0 {
		return "INVALID"
	}
	d := seconds / 86400
	h := seconds / 3600 % 24
	m := seconds / 60 % 60
	s := seconds % 60
	switch {
	case d > 0:
		return fmt.Sprintf("%d-%02d:%02d:%02d", d, h, m, s)
	case h > 0:
		return fmt.Sprintf("%d:%02d:%02d", h, m, s)
	}
	return fmt.Sprintf("%d:%02d", m, s)
}

// FormatTimeLimit renders a time limit the way squeue shows it (%l): 0 is
// "UNLIMITED", anything else as FormatDuration. It is the inverse of
// ParseTimeLimit.
func FormatTimeLimit(seconds int64) string {
	if seconds == 0 {
		return "UNLIMITED"
	}
	return FormatDuration(seconds)
}

// namedTimes are Slurm's --begin words that mean a time of day: the next
// occurrence of it.
var namedTimes = map[string]int{
	"midnight": 0,
	"noon":     12,
	"fika":     15,
	"teatime":  16,
}

// ParseBegin parses a Slurm --begin value relative to now, in now's time
// zone. The forms are:
//
//	HH:MM[:SS]                 the next time the clock shows it (today or tomorrow)
//	YYYY-MM-DD[THH:MM[:SS]]    that date, at midnight unless a time is given
//	now[+N[unit]]              unit: seconds (default), minutes, hours, days, weeks
//	today, tomorrow            midnight at the start of that day
//	midnight, noon, fika, teatime  the next 00:00, 12:00, 15:00, 16:00
//
// A time in the past is accepted: the job is simply eligible at once.
func ParseBegin(s string, now time.Time) (time.Time, error) { return parseWhen("--begin", s, now) }

// ParseDeadline parses sbatch's --deadline, which takes --begin's forms.
func ParseDeadline(s string, now time.Time) (time.Time, error) {
	return parseWhen("--deadline", s, now)
}

// parseWhen parses a time in --begin's forms for option.
func parseWhen(option, s string, now time.Time) (time.Time, error) {
	bad := func(why string) error {
		return optionError(option, s, nil,
			"%s (use HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]], now+N[seconds|minutes|hours|days|weeks], today, tomorrow, midnight or noon)", why)
	}
	if s == "" {
		return time.Time{}, bad("empty " + strings.TrimPrefix(option, "--") + " time")
	}
	lower := strings.ToLower(s)
	midnight := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, now.Location())
	switch lower {
	case "now":
		return now, nil
	case "today":
		return midnight, nil
	case "tomorrow":
		return midnight.AddDate(0, 0, 1), nil
	}
	if h, ok := namedTimes[lower]; ok {
		return nextClock(now, h, 0, 0), nil
	}
	if rest, ok := strings.CutPrefix(lower, "now+"); ok {
		d, why := beginOffset(rest)
		if why != "" {
			return time.Time{}, bad(why)
		}
		return now.Add(d), nil
	}
	if strings.Contains(s, "-") {
		t, why := beginDate(s, now.Location())
		if why != "" {
			return time.Time{}, bad(why)
		}
		return t, nil
	}
	h, m, sec, why := clockTime(s)
	if why != "" {
		return time.Time{}, bad(why)
	}
	return nextClock(now, h, m, sec), nil
}

// nextClock returns the first moment at or after now when the clock shows
// h:m:s.
func nextClock(now time.Time, h, m, s int) time.Time {
	t := time.Date(now.Year(), now.Month(), now.Day(), h, m, s, 0, now.Location())
	if t.Before(now) {
		t = t.AddDate(0, 0, 1)
	}
	return t
}

var beginUnits = []struct {
	names []string
	unit  time.Duration
}{
	{[]string{"", "s", "sec", "secs", "second", "seconds"}, time.Second},
	{[]string{"m", "min", "mins", "minute", "minutes"}, time.Minute},
	{[]string{"h", "hour", "hours"}, time.Hour},
	{[]string{"d", "day", "days"}, 24 * time.Hour},
	{[]string{"w", "week", "weeks"}, 7 * 24 * time.Hour},
}

// beginOffset parses the "N[unit]" of now+N[unit].
func beginOffset(s string) (time.Duration, string) {
	digits := strings.TrimRight(s, "abcdefghijklmnopqrstuvwxyz")
	unit := s[len(digits):]
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n < 0 || strings.HasPrefix(digits, "+") {
		return 0, fmt.Sprintf("offset %q is not a whole number", digits)
	}
	for _, u := range beginUnits {
		for _, name := range u.names {
			if unit == name {
				if n > int64(100*365*24*time.Hour/u.unit) {
					return 0, "offset is more than 100 years"
				}
				return time.Duration(n) * u.unit, ""
			}
		}
	}
	return 0, fmt.Sprintf("unknown unit %q", unit)
}

// beginDate parses YYYY-MM-DD[THH:MM[:SS]].
func beginDate(s string, loc *time.Location) (time.Time, string) {
	date, clock, hasClock := strings.Cut(s, "T")
	d, err := time.ParseInLocation("2006-01-02", date, loc)
	if err != nil {
		return time.Time{}, fmt.Sprintf("%q is not a date YYYY-MM-DD", date)
	}
	if !hasClock {
		return d, ""
	}
	h, m, sec, why := clockTime(clock)
	if why != "" {
		return time.Time{}, why
	}
	return time.Date(d.Year(), d.Month(), d.Day(), h, m, sec, 0, loc), ""
}

// clockTime parses HH:MM[:SS] on a 24-hour clock.
func clockTime(s string) (h, m, sec int, why string) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, 0, 0, fmt.Sprintf("%q is not a time HH:MM[:SS]", s)
	}
	limits := []int{23, 59, 59}
	vals := make([]int, 3)
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || len(p) > 2 || n < 0 || n > limits[i] || strings.HasPrefix(p, "+") {
			return 0, 0, 0, fmt.Sprintf("%q is not a time HH:MM[:SS] on a 24-hour clock", s)
		}
		vals[i] = n
	}
	return vals[0], vals[1], vals[2], ""
}
