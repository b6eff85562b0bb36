package submit

import (
	"strings"
	"testing"

	"corral/api"
)

func TestParseSignalOption(t *testing.T) {
	tests := map[string]struct {
		arg  string
		want *api.WarnSignal
		err  string
	}{
		"a name":              {"--signal=USR1", &api.WarnSignal{Signal: 10, BeforeS: 60}, ""},
		"a number and a time": {"--signal=12@300", &api.WarnSignal{Signal: 12, BeforeS: 300}, ""},
		"batch only":          {"--signal=B:SIGTERM@5", &api.WarnSignal{Signal: 15, BeforeS: 5, Batch: true}, ""},
		"R: (MaxStartDelay)":  {"--signal=R:USR1", nil, "corral's reservations never lend their nodes"},
		"an unknown prefix":   {"--signal=X:USR1", nil, "prefix must be B:"},
		"an unknown signal":   {"--signal=FOO", nil, "give [B:]SIG"},
		"a time out of range": {"--signal=USR1@70000", nil, "from 0 to 65535"},
		"a negative time":     {"--signal=USR1@-1", nil, "from 0 to 65535"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			req, err := Parse([]string{tc.arg, "job.sh"}, testContext(map[string]string{"job.sh": basicScript}))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("%s: %v, want an error with %q", tc.arg, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := req.Spec.Signal; got == nil || *got != *tc.want {
				t.Fatalf("%s: %+v, want %+v", tc.arg, got, tc.want)
			}
		})
	}
	// The controllers check it again.
	sp := api.JobSpec{Signal: &api.WarnSignal{Signal: 99}}
	if err := checkWarnSignal(&sp, testNow); err == nil {
		t.Error("signal 99 passed validation")
	}
}
