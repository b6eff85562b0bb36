package vmimage

import "testing"

func TestParseControl(t *testing.T) {
	tests := map[string]struct {
		line string
		want Event
		ok   bool
	}{
		"started":             {"CORRAL STARTED", Event{Kind: EventStarted}, true},
		"started with LF":     {"CORRAL STARTED\n", Event{Kind: EventStarted}, true},
		"started with CRLF":   {"CORRAL STARTED\r\n", Event{Kind: EventStarted}, true},
		"exit 0":              {"CORRAL EXIT 0", Event{Kind: EventExit, Code: 0}, true},
		"exit 3":              {"CORRAL EXIT 3\n", Event{Kind: EventExit, Code: 3}, true},
		"exit by SIGKILL":     {"CORRAL EXIT 137", Event{Kind: EventExit, Code: 137}, true},
		"exit 255":            {"CORRAL EXIT 255", Event{Kind: EventExit, Code: 255}, true},
		"oom":                 {"CORRAL OOM", Event{Kind: EventOOM}, true},
		"ready":               {"CORRAL READY\n", Event{Kind: EventReady}, true},
		"ready with junk":     {"CORRAL READY now", Event{}, false},
		"error":               {"CORRAL ERROR no job payload: /job/script is missing", Event{Kind: EventError, Text: "no job payload: /job/script is missing"}, true},
		"exit out of range":   {"CORRAL EXIT 256", Event{}, false},
		"exit negative":       {"CORRAL EXIT -1", Event{}, false},
		"exit not a number":   {"CORRAL EXIT x", Event{}, false},
		"exit leading zero":   {"CORRAL EXIT 03", Event{}, false},
		"exit without code":   {"CORRAL EXIT", Event{}, false},
		"started with junk":   {"CORRAL STARTED now", Event{}, false},
		"unknown word":        {"CORRAL HELLO", Event{}, false},
		"lower case":          {"corral exit 0", Event{}, false},
		"leading noise":       {"xCORRAL EXIT 0", Event{}, false},
		"empty":               {"", Event{}, false},
		"old VM-NOTES marker": {"EXIT=0", Event{}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := ParseControl(tc.line)
			if ok != tc.ok || got != tc.want {
				t.Errorf("ParseControl(%q) = %+v, %v; want %+v, %v", tc.line, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestEventString(t *testing.T) {
	for _, line := range []string{"STARTED", "OOM", "EXIT 42", "ERROR bad thing"} {
		ev, ok := ParseControl(controlPrefix + line)
		if !ok || ev.String() != line {
			t.Errorf("ParseControl(%q).String() = %q, %v", line, ev.String(), ok)
		}
	}
}

func TestKernelCmdline(t *testing.T) {
	got := KernelCmdline(2596144, "corral.hostname=n1")
	want := BaseCmdline + " tsc_early_khz=2596144 corral.hostname=n1"
	if got != want {
		t.Errorf("KernelCmdline = %q, want %q", got, want)
	}
	if got := KernelCmdline(0); got != BaseCmdline {
		t.Errorf("KernelCmdline(0) = %q, want %q", got, BaseCmdline)
	}
	if got, want := ControlPort.DeviceArg("ctl"), "isa-serial,chardev=ctl,iobase=0x2e8,irq=6"; got != want {
		t.Errorf("DeviceArg = %q, want %q", got, want)
	}
}
