package api

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestParseSignal(t *testing.T) {
	tests := map[string]struct {
		in   string
		want int
		err  string
	}{
		"a name":          {"USR1", 10, ""},
		"with SIG":        {"SIGTERM", 15, ""},
		"lower case":      {"usr2", 12, ""},
		"a number":        {"2", 2, ""},
		"a realtime one":  {"40", 40, ""},
		"zero":            {"0", 0, "from 1 to 64"},
		"too large":       {"65", 0, "from 1 to 64"},
		"an unknown name": {"FOO", 0, "unknown"},
		"empty":           {"", 0, "unknown"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseSignal(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseSignal(%q) = %d, %v; want an error with %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseSignal(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
			if again, _ := ParseSignal(SignalName(got)); again != got {
				t.Fatalf("SignalName(%d) = %q does not parse back", got, SignalName(got))
			}
		})
	}
}

func TestCheckJobPath(t *testing.T) {
	for p, ok := range map[string]bool{"/home/u/x": true, "results/out.txt": true, "": false, "../etc/passwd": false,
		"/a/../b": false, "a\x00b": false, "./x": true} {
		if err := CheckJobPath(p); (err == nil) != ok {
			t.Errorf("CheckJobPath(%q) = %v", p, err)
		}
	}
	if got := JobPath("/work", "out/x"); got != "/work/out/x" {
		t.Errorf("JobPath = %q", got)
	}
}

// FuzzReadStreamFrame reads what the other end of an exec stream sends:
// a node reads the client's frames, the client the node's. A frame read
// must be one that WriteStreamFrame writes back identically, and nothing
// may be read past a bad header.
func FuzzReadStreamFrame(f *testing.F) {
	var b bytes.Buffer
	WriteStreamFrame(&b, StreamStdout, []byte("hello"))
	WriteStreamFrame(&b, StreamExit, []byte(`{"code":3}`))
	f.Add(b.Bytes())
	f.Add([]byte{9, 0, 0, 0, 1, 'x'})
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		var re bytes.Buffer
		for {
			typ, p, err := ReadStreamFrame(r)
			if err != nil {
				if errors.Is(err, io.EOF) && r.Len() != 0 {
					t.Fatalf("EOF with %d bytes left", r.Len())
				}
				break
			}
			if len(p) > MaxStreamPayload || typ < StreamStdin || typ > StreamExit {
				t.Fatalf("read a frame of type %d and %d bytes", typ, len(p))
			}
			if err := WriteStreamFrame(&re, typ, p); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.HasPrefix(in, re.Bytes()) {
			t.Fatalf("the frames read do not encode back to the input's start")
		}
	})
}
