package procref

import (
	"os"
	"strings"
	"testing"
)

func TestParseStat(t *testing.T) {
	tests := map[string]struct {
		line    string
		want    Stat
		wantErr bool
	}{
		"name with spaces and parentheses": {
			line: "1234 (a (weird) name) S 1 1234 1234 0 -1 4194560 1 0 0 0 25 5 0 0 20 0 1 0 987654 1000 100",
			want: Stat{State: 'S', PGID: 1234, Session: 1234, Start: 987654, CPUTicks: 30},
		},
		"zombie": {
			line: "7 (sh) Z 1 7 7 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 42 0 0",
			want: Stat{State: 'Z', PGID: 7, Session: 7, Start: 42},
		},
		"garbage":           {line: "garbage", wantErr: true},
		"short":             {line: "1 (sh) S 1 1 1", wantErr: true},
		"bad start time":    {line: "1 (sh) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 x 0 0", wantErr: true},
		"bad session":       {line: "1 (sh) S 1 1 y 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0", wantErr: true},
		"bad process group": {line: "1 (sh) S 1 z 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0", wantErr: true},
		"bad user time":     {line: "1 (sh) S 1 1 1 0 -1 0 0 0 0 0 u 0 0 0 20 0 1 0 5 0 0", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st, err := ParseStat([]byte(tc.line))
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseStat error = %v, want error %v", err, tc.wantErr)
			}
			if st != tc.want {
				t.Errorf("ParseStat = %+v, want %+v", st, tc.want)
			}
		})
	}
}

func TestStatStates(t *testing.T) {
	tests := map[string]struct {
		state          byte
		ended, stopped bool
	}{
		"running":  {state: 'R'},
		"sleeping": {state: 'S'},
		"zombie":   {state: 'Z', ended: true},
		"dead":     {state: 'X', ended: true},
		"stopped":  {state: 'T', stopped: true},
		"traced":   {state: 't', stopped: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := Stat{State: tc.state}
			if st.Ended() != tc.ended || st.Stopped() != tc.stopped {
				t.Errorf("Ended, Stopped = %v, %v; want %v, %v", st.Ended(), st.Stopped(), tc.ended, tc.stopped)
			}
		})
	}
}

func TestReadStatSelf(t *testing.T) {
	st, err := ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.Start == 0 || st.Ended() {
		t.Errorf("ReadStat(self) = %+v", st)
	}
	if _, err := ReadStat(-1); err == nil {
		t.Error("ReadStat(-1) succeeded")
	}
}

func TestBootID(t *testing.T) {
	id := BootID()
	if !strings.Contains(id, "-") {
		t.Errorf("boot id %q", id)
	}
	if BootID() != id {
		t.Error("boot id changed between calls")
	}
}
