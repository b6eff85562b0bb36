package submit

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseAcctTime parses a time as sacct's --starttime and --endtime take
// it, relative to now and in now's time zone. The forms are Slurm's:
//
//	HH:MM[:SS][AM|PM]               that time today (yesterday if it is still to come)
//	MMDD[YY][-HH:MM[:SS]]           a date, at midnight unless a time is given
//	MM/DD[/YY][-HH:MM[:SS]]
//	MM.DD[.YY][-HH:MM[:SS]]
//	YYYY-MM-DD[THH:MM[:SS]]
//	today, midnight                 the start of today
//	noon, fika, teatime             the last 12:00, 15:00, 16:00
//	now[{+|-}N[unit]]               unit: seconds (default), minutes, hours, days, weeks
//
// A date without a year is in the current year, or the last one when that
// date is still to come this year. option names the option in errors.
func ParseAcctTime(option, s string, now time.Time) (time.Time, error) {
	bad := func(why string) error {
		return optionError(option, s, nil,
			"%s (use HH:MM[:SS], MMDD[YY], MM/DD[/YY], MM.DD[.YY] or YYYY-MM-DD[THH:MM[:SS]], now-N[minutes|hours|days|weeks], today or midnight)", why)
	}
	if s == "" {
		return time.Time{}, bad("empty time")
	}
	lower := strings.ToLower(s)
	midnight := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, now.Location())
	switch lower {
	case "now":
		return now, nil
	case "today", "midnight":
		return midnight, nil
	case "tomorrow":
		return midnight.AddDate(0, 0, 1), nil
	}
	if h, ok := namedTimes[lower]; ok {
		return lastClock(now, h, 0, 0), nil
	}
	if rest, ok := strings.CutPrefix(lower, "now"); ok && len(rest) > 1 && (rest[0] == '+' || rest[0] == '-') {
		d, why := beginOffset(rest[1:])
		if why != "" {
			return time.Time{}, bad(why)
		}
		if rest[0] == '-' {
			d = -d
		}
		return now.Add(d), nil
	}
	if len(s) > 4 && s[4] == '-' && isDigits(s[:4]) {
		t, why := beginDate(s, now.Location())
		if why != "" {
			return time.Time{}, bad(why)
		}
		return t, nil
	}
	if strings.ContainsAny(s, "/.") || isDigits(strings.SplitN(s, "-", 2)[0]) {
		t, why := monthDay(s, now)
		if why != "" {
			return time.Time{}, bad(why)
		}
		return t, nil
	}
	h, m, sec, why := clock12(s)
	if why != "" {
		return time.Time{}, bad(why)
	}
	return lastClock(now, h, m, sec), nil
}

// lastClock returns the last moment at or before now when the clock
// showed h:m:s.
func lastClock(now time.Time, h, m, s int) time.Time {
	t := time.Date(now.Year(), now.Month(), now.Day(), h, m, s, 0, now.Location())
	if t.After(now) {
		t = t.AddDate(0, 0, -1)
	}
	return t
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// clock12 parses HH:MM[:SS] with an optional AM or PM.
func clock12(s string) (h, m, sec int, why string) {
	upper := strings.ToUpper(s)
	pm, am := strings.HasSuffix(upper, "PM"), strings.HasSuffix(upper, "AM")
	if am || pm {
		s = strings.TrimSpace(s[:len(s)-2])
	}
	h, m, sec, why = clockTime(s)
	if why != "" || !am && !pm {
		return h, m, sec, why
	}
	if h < 1 || h > 12 {
		return 0, 0, 0, fmt.Sprintf("%q: an hour with AM or PM is from 1 to 12", s)
	}
	h %= 12
	if pm {
		h += 12
	}
	return h, m, sec, ""
}

// monthDay parses MMDD[YY], MM/DD[/YY] and MM.DD[.YY], each with an
// optional -HH:MM[:SS].
func monthDay(s string, now time.Time) (time.Time, string) {
	date, clock, hasClock := strings.Cut(s, "-")
	var parts []string
	switch {
	case strings.Contains(date, "/"):
		parts = strings.Split(date, "/")
	case strings.Contains(date, "."):
		parts = strings.Split(date, ".")
	case len(date) == 4 || len(date) == 6:
		for i := 0; i < len(date); i += 2 {
			parts = append(parts, date[i:i+2])
		}
	default:
		return time.Time{}, fmt.Sprintf("%q is not a date MMDD[YY]", date)
	}
	if len(parts) < 2 || len(parts) > 3 {
		return time.Time{}, fmt.Sprintf("%q is not a date MM/DD[/YY]", date)
	}
	nums := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || len(p) == 0 || len(p) > 2 || !isDigits(p) {
			return time.Time{}, fmt.Sprintf("%q is not a date MM/DD[/YY]", date)
		}
		nums[i] = n
	}
	month, dayOfMonth := nums[0], nums[1]
	if month < 1 || month > 12 || dayOfMonth < 1 || dayOfMonth > 31 {
		return time.Time{}, fmt.Sprintf("%q: month %d or day %d is out of range", date, month, dayOfMonth)
	}
	var h, m, sec int
	if hasClock {
		var why string
		if h, m, sec, why = clockTime(clock); why != "" {
			return time.Time{}, why
		}
	}
	year := now.Year()
	if len(nums) == 3 {
		year = 2000 + nums[2]
	}
	t := time.Date(year, time.Month(month), dayOfMonth, h, m, sec, 0, now.Location())
	if t.Day() != dayOfMonth {
		return time.Time{}, fmt.Sprintf("%q: %s has no day %d", date, time.Month(month), dayOfMonth)
	}
	if len(nums) == 2 && t.After(now) {
		t = t.AddDate(-1, 0, 0)
	}
	return t, ""
}
