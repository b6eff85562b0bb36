package vmimage

import "testing"

// FuzzParseControl checks the host's reader of the guest's control port:
// the guest is the job's, so its lines are untrusted. An exit code must be
// in 0..255 and a line must parse the same with or without its ending.
func FuzzParseControl(f *testing.F) {
	for _, s := range []string{"CORRAL STARTED", "CORRAL EXIT 3\n", "CORRAL EXIT 256", "CORRAL OOM", "CORRAL ERROR no such file\r\n", "CORRAL EXIT -1", "CORRAL EXIT 03", "noise"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		ev, ok := ParseControl(line)
		if !ok {
			return
		}
		if ev.Kind == EventExit && (ev.Code < 0 || ev.Code > 255) {
			t.Fatalf("ParseControl(%q) gave exit code %d", line, ev.Code)
		}
		if again, ok2 := ParseControl(line + "\n"); !ok2 || again != ev {
			t.Fatalf("ParseControl(%q) = %+v, but with a newline %+v, %v", line, ev, again, ok2)
		}
	})
}
