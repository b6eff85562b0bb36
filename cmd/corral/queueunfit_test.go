//go:build !corral_client

package main

import (
	"strings"
	"testing"

	"corral/api"
)

func TestMarkQueueUnfit(t *testing.T) {
	tests := map[string]struct {
		names []string
		want  string // name:queue_unfit,... or the error
	}{
		"none":                  {nil, "batch:false,debug:false"},
		"a configured one":      {[]string{"debug"}, "batch:false,debug:true"},
		"one only nodes list":   {[]string{"cloud"}, "batch:false,debug:false,cloud:true"},
		"a name that is a path": {[]string{"../x"}, `--queue-unfit: partition name "../x" must start with a letter`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			parts, err := markQueueUnfit([]api.Partition{{Name: "batch", Default: true}, {Name: "debug"}}, tc.names)
			var got []string
			for _, p := range parts {
				got = append(got, p.Name+":"+map[bool]string{true: "true", false: "false"}[p.QueueUnfit])
			}
			text := strings.Join(got, ",")
			if err != nil {
				text = err.Error()
			}
			if !strings.HasPrefix(text, tc.want) {
				t.Fatalf("got %q, want %q", text, tc.want)
			}
		})
	}
}
