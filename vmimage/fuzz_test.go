package vmimage

import (
	"reflect"
	"slices"
	"testing"
)

// FuzzParseControl checks the host's reader of the guest's control port:
// the guest is the job's, so its lines are untrusted. An exit code must be
// in 0..255 and a line must parse the same with or without its ending.
func FuzzParseControl(f *testing.F) {
	for _, s := range []string{"CORRAL STARTED", "CORRAL READY", "CORRAL EXIT 3\n", "CORRAL EXIT 256", "CORRAL OOM", "CORRAL ERROR no such file\r\n", "CORRAL EXIT -1", "CORRAL EXIT 03", "noise"} {
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

// FuzzParseFS checks the guest's reader of job/fs: what it accepts is
// valid, and encodes to what it reads back the same (shares in encode's
// order).
func FuzzParseFS(f *testing.F) {
	f.Add([]byte("root virtiofs corral\nshare /home/u\n"))
	f.Add([]byte("root nfs 10.0.2.2 2049 / 10.0.2.15/24 65520\ngateway 10.0.2.2\nnameserver 10.1.1.1\nshare /scratch\nshare /home\n"))
	f.Add([]byte("root nfs 10.0.2.2 x / 10.0.2.15/24\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fs, err := ParseFS(b)
		if err != nil {
			return
		}
		if err := fs.Validate(); err != nil {
			t.Fatalf("ParseFS(%q) accepted %+v, which Validate refuses: %v", b, fs, err)
		}
		again, err := ParseFS(fs.encode())
		if err != nil {
			t.Fatalf("ParseFS(%q) = %+v, whose encoding %q does not parse: %v", b, fs, fs.encode(), err)
		}
		slices.Sort(fs.Shares)
		if !reflect.DeepEqual(again, fs) {
			t.Fatalf("ParseFS(%q) = %+v, but its encoding reads back as %+v", b, fs, again)
		}
	})
}

// FuzzParseUser checks the guest's reader of job/user the same way.
func FuzzParseUser(f *testing.F) {
	f.Add([]byte("alice\n1000\n1000\n1000 27\n/home/alice\n"))
	f.Add([]byte("bob\n1001\n100\n\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := ParseUser(b)
		if err != nil {
			return
		}
		again, err := ParseUser(u.encode())
		if err != nil {
			t.Fatalf("ParseUser(%q) = %+v, whose encoding %q does not parse: %v", b, u, u.encode(), err)
		}
		if !reflect.DeepEqual(again, u) {
			t.Fatalf("ParseUser(%q) = %+v, but its encoding reads back as %+v", b, u, again)
		}
	})
}
