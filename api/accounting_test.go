package api

import (
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestAcctQueryRoundTrip(t *testing.T) {
	q := AcctQuery{Jobs: []uint64{12, 13}, Users: []string{"ada"}, Accounts: []string{"physics"}, Tenants: []string{"lab"}, AllUsers: true,
		States: []JobState{StateFailed, StateTimeout}, Start: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC),
		End: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Duplicates: true}
	got, err := ParseAcctQuery(q.Values())
	if err != nil || !reflect.DeepEqual(got, q) {
		t.Errorf("got %+v, %v; want %+v", got, err, q)
	}
}

func TestParseAcctQueryRefuses(t *testing.T) {
	for raw, want := range map[string]string{
		"job=x":               "job=",
		"job=0":               "job=",
		"state=LOST":          "state=",
		"start=yesterday":     "start=",
		"end=2026-13-01":      "end=",
		"user=":               "user=",
		"account=a%00b":       "account=",
		"user=ada&user=b%0Ac": "user=",
	} {
		v, _ := url.ParseQuery(raw)
		if _, err := ParseAcctQuery(v); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %s", raw, err, want)
		}
	}
}

// FuzzParseAcctQuery: any query string parses or is refused, never
// panics; what parses encodes to parameters that parse the same.
func FuzzParseAcctQuery(f *testing.F) {
	f.Add("job=12&user=ada&state=CD&start=2026-11-01T00:00:00Z&all=1")
	f.Add("account=a&duplicates=1&end=2026-12-01T00:00:00Z")
	f.Add("job=1&job=2&state=F&state=TIMEOUT")
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := ParseAcctQuery(v)
		if err != nil {
			return
		}
		again, err := ParseAcctQuery(q.Values())
		if err != nil {
			t.Fatalf("%q: %+v encodes to parameters that fail: %v", raw, q, err)
		}
		if !again.Start.Equal(q.Start) || !again.End.Equal(q.End) {
			t.Fatalf("%q: the window %v..%v came back as %v..%v", raw, q.Start, q.End, again.Start, again.End)
		}
		q.Start, q.End, again.Start, again.End = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if !reflect.DeepEqual(again, q) {
			t.Fatalf("%q: %+v came back as %+v", raw, q, again)
		}
	})
}
