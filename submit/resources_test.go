package submit

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"corral/api"
)

func TestParseMemory(t *testing.T) {
	tests := map[string]struct {
		in   string
		want int64
	}{
		"default unit is MiB": {"4096", 4096},
		"zero":                {"0", 0},
		"M":                   {"100M", 100},
		"lower m":             {"100m", 100},
		"G":                   {"4G", 4096},
		"lower g":             {"4g", 4096},
		"T":                   {"1T", 1024 * 1024},
		"lower t":             {"2t", 2 * 1024 * 1024},
		"K exact":             {"2048K", 2},
		"K rounds up":         {"2049K", 3},
		"small K is 1 MiB":    {"512K", 1},
		"one K":               {"1k", 1},
		"zero K":              {"0K", 0},
		"leading zeros":       {"0010G", 10240},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseMemory(tc.in)
			if err != nil {
				t.Fatalf("ParseMemory(%q): %v", tc.in, err)
			}
			if got != tc.want {
				t.Errorf("ParseMemory(%q) = %d, want %d", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseMemoryErrors(t *testing.T) {
	tests := map[string]struct {
		in, want string
	}{
		"unknown unit":   {"4X", `--mem=4X: unknown unit "X" (use K, M, G or T)`},
		"two-letter GB":  {"4GB", `--mem=4GB: unknown unit "GB" (use K, M, G or T)`},
		"unit only":      {"G", `--mem=G: "" is not a whole number of megabytes (use e.g. 4096, 512K, 4G or 1T)`},
		"empty":          {"", `--mem: "" is not a whole number of megabytes (use e.g. 4096, 512K, 4G or 1T)`},
		"negative":       {"-1G", `--mem=-1G: "-1" is not a whole number of megabytes (use e.g. 4096, 512K, 4G or 1T)`},
		"decimal":        {"1.5G", `--mem=1.5G: "1.5" is not a whole number of megabytes (use e.g. 4096, 512K, 4G or 1T)`},
		"space":          {"4 G", `--mem=4 G: "4 " is not a whole number of megabytes (use e.g. 4096, 512K, 4G or 1T)`},
		"too large T":    {"2000000T", "--mem=2000000T: size is too large (the most is 1024P)"},
		"too large MiB":  {"99999999999999999999", "size is too large"},
		"unit in middle": {"4G4", `"4G4" is not a whole number`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseMemory(tc.in)
			if err == nil {
				t.Fatalf("ParseMemory(%q) succeeded", tc.in)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseMemory(%q) error = %q, want it to contain %q", tc.in, err, tc.want)
			}
			var e *Error
			if !errors.As(err, &e) || e.Field != "--mem" {
				t.Errorf("error is not an *Error for --mem: %#v", err)
			}
		})
	}
}

func TestParseGres(t *testing.T) {
	tests := map[string]struct {
		in   string
		want []api.Gres
	}{
		"name only":      {"gpu", []api.Gres{{Name: "gpu", Count: 1}}},
		"name and count": {"gpu:2", []api.Gres{{Name: "gpu", Count: 2}}},
		"name type count": {"gpu:a100:2",
			[]api.Gres{{Name: "gpu", Type: "a100", Count: 2}}},
		"name and type": {"gpu:a100", []api.Gres{{Name: "gpu", Type: "a100", Count: 1}}},
		"type with dots and dashes": {"gpu:h100-80gb.sxm:8",
			[]api.Gres{{Name: "gpu", Type: "h100-80gb.sxm", Count: 8}}},
		"list": {"gpu:a100:2,nic:1,license",
			[]api.Gres{{Name: "gpu", Type: "a100", Count: 2}, {Name: "nic", Count: 1}, {Name: "license", Count: 1}}},
		"same name, two types": {"gpu:a100:1,gpu:v100:2",
			[]api.Gres{{Name: "gpu", Type: "a100", Count: 1}, {Name: "gpu", Type: "v100", Count: 2}}},
		"none":       {"none", nil},
		"NONE upper": {"NONE", nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseGres(tc.in)
			if err != nil {
				t.Fatalf("ParseGres(%q): %v", tc.in, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseGres(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseGresErrors(t *testing.T) {
	tests := map[string]struct {
		in, contains string
	}{
		"empty":            {"", "empty resource list"},
		"empty entry":      {"gpu,,nic", "empty entry"},
		"trailing comma":   {"gpu:1,", "empty entry"},
		"zero count":       {"gpu:0", `count "0" in "gpu:0" must be between 1 and 1000000`},
		"huge count":       {"gpu:99999999", "must be between 1 and 1000000"},
		"negative count":   {"gpu:-1", `type "-1"`},
		"empty type":       {"gpu::2", `type ""`},
		"trailing colon":   {"gpu:", `type ""`},
		"missing count":    {"gpu:a100:", `count "" in "gpu:a100:" is not a whole number`},
		"count then type":  {"gpu:2:a100", `count "a100"`},
		"too many fields":  {"gpu:a:b:2", "too many fields"},
		"empty name":       {":2", `name ""`},
		"bad name":         {"g/pu:1", `name "g/pu"`},
		"bad type":         {"gpu:a 100:1", `type "a 100"`},
		"duplicate":        {"gpu:1,gpu:2", `"gpu" is listed twice`},
		"duplicate typed":  {"gpu:a100:1,gpu:a100:2", `"gpu:a100" is listed twice`},
		"count with space": {"gpu: 2", `type " 2"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseGres(tc.in)
			if err == nil {
				t.Fatalf("ParseGres(%q) succeeded", tc.in)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.contains) || !strings.HasPrefix(msg, "--gres") || !strings.Contains(msg, "NAME[:TYPE][:COUNT]") {
				t.Errorf("ParseGres(%q) error %q should name --gres, contain %q and show the form", tc.in, msg, tc.contains)
			}
		})
	}
}
