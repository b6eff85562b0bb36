package vmimage

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// payloadFiles writes p and reads it back with ParsePayload.
func payloadFiles(t testing.TB, p Payload) ([]PayloadFile, []byte) {
	t.Helper()
	var b bytes.Buffer
	if err := WritePayload(&b, p); err != nil {
		t.Fatal(err)
	}
	files, err := ParsePayload(b.Bytes())
	if err != nil {
		t.Fatalf("ParsePayload of WritePayload's archive: %v", err)
	}
	return files, b.Bytes()
}

// TestParsePayloadReadsWhatWritePayloadWrites checks the guest's reader of
// a payload sent over the agent against the writer of the one an initrd
// carries: the same files, the same bytes.
func TestParsePayloadReadsWhatWritePayloadWrites(t *testing.T) {
	p := Payload{Script: []byte("#!/bin/bash\necho 'hi there'\n"), Env: []string{"A=1", "B=two words\nand a line"}, Args: []string{"", "x"},
		WorkDir: "/home/alice/run", User: &User{Name: "alice", UID: 1000, GID: 100, Groups: []uint32{100, 27}, Home: "/home/alice"},
		FS:    &FS{Kind: ShareNFS, Addr: "10.0.2.2", Port: 2049, Export: "/", GuestAddr: "10.0.2.15/24", MTU: 65520, Shares: []string{"/home/alice"}},
		Input: "/home/alice/run/in.txt", Rlimits: []Rlimit{{Name: "NOFILE", Value: 1024}}}
	jn := testNet()
	p.Net = &jn
	files, _ := payloadFiles(t, p)
	if len(files) != len(p.entries())-1 {
		t.Errorf("ParsePayload gave %d files of the %d a full payload has", len(files), len(p.entries())-1)
	}
	got := map[string]string{}
	for _, f := range files {
		got[f.Name] = string(f.Data)
	}
	want := map[string]string{}
	for _, e := range p.entries()[1:] {
		want[strings.TrimPrefix(e.name, "job/")] = string(e.data)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParsePayload = %q, want %q", got, want)
	}
}

func TestParsePayloadRefuses(t *testing.T) {
	_, good := payloadFiles(t, Payload{Script: []byte("true\n"), WorkDir: "/"})
	var other bytes.Buffer
	cw := cpioWriter{w: &other}
	cw.entry("job", modeDir|0o755, 2, nil)
	cw.entry("job/../etc/passwd", modeFile|0o644, 1, []byte("x"))
	cw.entry(trailer, 0, 1, nil)
	var link bytes.Buffer
	cw = cpioWriter{w: &link}
	cw.entry("job/script", 0o120777, 1, []byte("/etc/shadow"))
	cw.entry(trailer, 0, 1, nil)
	var twice bytes.Buffer
	cw = cpioWriter{w: &twice}
	cw.entry("job/env", modeFile|0o644, 1, nil)
	cw.entry("job/env", modeFile|0o644, 1, []byte("A=1\x00"))
	cw.entry(trailer, 0, 1, nil)
	cases := map[string]struct {
		b    []byte
		want string
	}{
		"empty":              {nil, "cut short"},
		"cut before trailer": {good[:len(good)-124], "cut short"},
		"not newc":           {append([]byte("070707"), good[6:]...), "not a newc header"},
		"bad hex":            {append(append([]byte(nil), good[:6]...), append([]byte("zzzzzzzz"), good[14:]...)...), "not hex"},
		"a path outside job": {other.Bytes(), "is not a file of a job's payload"},
		"a symbolic link":    {link.Bytes(), "is not a file of a job's payload"},
		"a file twice":       {twice.Bytes(), "twice"},
		"data after it":      {append(append([]byte(nil), good...), "more"...), "after the trailer"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := ParsePayload(tc.b); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParsePayload = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// FuzzParsePayload checks the guest's reader of a payload the agent
// received: it never panics, names only the job's files, and what it
// accepts is what WritePayload would write for those files.
func FuzzParsePayload(f *testing.F) {
	_, good := payloadFiles(f, Payload{Script: []byte("#!/bin/sh\necho hi\n"), Env: []string{"A=1"}, WorkDir: "/tmp",
		User: &User{Name: "u", UID: 1, GID: 1}})
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte("070701"))
	f.Fuzz(func(t *testing.T, b []byte) {
		files, err := ParsePayload(b)
		if err != nil {
			return
		}
		for _, file := range files {
			if !payloadNames[file.Name] {
				t.Fatalf("ParsePayload accepted a file %q", file.Name)
			}
		}
	})
}

func TestJobStartValidate(t *testing.T) {
	ok := JobStart{Seed: make([]byte, SeedBytes), TimeUnixNano: 1, Size: 100}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(*JobStart){
		"a short seed":        func(s *JobStart) { s.Seed = s.Seed[:8] },
		"no seed":             func(s *JobStart) { s.Seed = nil },
		"no clock":            func(s *JobStart) { s.TimeUnixNano = 0 },
		"an empty payload":    func(s *JobStart) { s.Size = 0 },
		"a payload too large": func(s *JobStart) { s.Size = MaxPayloadBytes + 1 },
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			s := ok
			s.Seed = append([]byte(nil), ok.Seed...)
			edit(&s)
			if err := s.Validate(); err == nil {
				t.Errorf("Validate accepted %+v", s)
			}
		})
	}
}

func TestSameShare(t *testing.T) {
	base := FS{Kind: ShareNFS, Addr: "10.0.2.2", Port: 2049, Export: "/", GuestAddr: "10.0.2.15/24", MTU: 65520}
	job := base
	job.Shares, job.Gateway, job.Nameservers = []string{"/home"}, "10.0.2.2", []string{"10.1.1.1"}
	if !base.SameShare(&job) {
		t.Error("a job's shares and way out made another share")
	}
	other := base
	other.Export = "/srv/roots/el9"
	if base.SameShare(&other) || base.SameShare(nil) {
		t.Error("another export (or none) is the same share")
	}
}
