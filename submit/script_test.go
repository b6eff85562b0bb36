package submit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReadScriptFile reads real files: a script, one over the limit (read
// no further than the limit), and paths that are not regular files, which
// are refused before anything is read.
func TestReadScriptFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "job.sh")
	big := filepath.Join(dir, "big.sh")
	fifo := filepath.Join(dir, "fifo")
	if err := os.WriteFile(good, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, []byte("#!/bin/sh\n"+strings.Repeat("#", 2*MaxScriptBytes)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		path    string
		size    int
		wantErr error
	}{
		"a script":                   {path: good, size: len("#!/bin/sh\necho hi\n")},
		"over the limit":             {path: big, size: MaxScriptBytes + 1},
		"/dev/zero":                  {path: "/dev/zero", wantErr: ErrNotRegularFile},
		"a directory":                {path: dir, wantErr: ErrNotRegularFile},
		"a FIFO nobody writes":       {path: fifo, wantErr: ErrNotRegularFile},
		"a file that does not exist": {path: filepath.Join(dir, "nope"), wantErr: os.ErrNotExist},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			data, err := ReadScriptFile(tc.path)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("ReadScriptFile = %d bytes, %v; want %v", len(data), err, tc.wantErr)
				}
				return
			}
			if err != nil || len(data) != tc.size {
				t.Fatalf("ReadScriptFile = %d bytes, %v; want %d bytes", len(data), err, tc.size)
			}
		})
	}
}

// TestParseRefusesDevZero submits /dev/zero with the default reader: Parse
// must fail at once with a clear message, not read forever.
func TestParseRefusesDevZero(t *testing.T) {
	c := testContext(nil)
	c.ReadFile = nil
	_, err := Parse([]string{"/dev/zero"}, c)
	if err == nil || !strings.Contains(err.Error(), "not a regular file (it is a character device)") ||
		!strings.Contains(err.Error(), "give the path of a batch script file") {
		t.Fatalf("Parse(/dev/zero) = %v", err)
	}
}
