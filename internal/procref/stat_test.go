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
			want: Stat{State: 'S', PPID: 1, PGID: 1234, Session: 1234, Start: 987654, CPUTicks: 30, Flags: 4194560},
		},
		"zombie": {
			line: "7 (sh) Z 1 7 7 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 42 0 0",
			want: Stat{State: 'Z', PPID: 1, PGID: 7, Session: 7, Start: 42, Flags: 4194560},
		},
		"vfork child before its exec": {
			line: "28313 (3) T 28289 28288 28288 0 -1 4194368 0 0 0 0 0 0 0 0 20 0 1 0 71505 2654208 405",
			want: Stat{State: 'T', PPID: 28289, PGID: 28288, Session: 28288, Start: 71505, Flags: 4194368},
		},
		"garbage":           {line: "garbage", wantErr: true},
		"short":             {line: "1 (sh) S 1 1 1", wantErr: true},
		"bad start time":    {line: "1 (sh) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 x 0 0", wantErr: true},
		"bad session":       {line: "1 (sh) S 1 1 y 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0", wantErr: true},
		"bad process group": {line: "1 (sh) S 1 z 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0", wantErr: true},
		"bad parent":        {line: "1 (sh) S p 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0", wantErr: true},
		"bad flags":         {line: "1 (sh) S 1 1 1 0 -1 f 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0", wantErr: true},
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

func TestForkedNotExeced(t *testing.T) {
	// 0x400040 is a vfork child caught before its exec; 0x400000 the same
	// process once it exec'd.
	if !(Stat{Flags: 0x400040}).ForkedNotExeced() || (Stat{Flags: 0x400000}).ForkedNotExeced() {
		t.Error("ForkedNotExeced does not read PF_FORKNOEXEC")
	}
	self, err := ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if self.ForkedNotExeced() {
		t.Errorf("the test process (exec'd) reads as forked and not exec'd: flags %#x", self.Flags)
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
