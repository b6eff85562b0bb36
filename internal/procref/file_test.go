package procref

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteInPlace writes each case's contents in turn to one file, which
// must then hold exactly the last: a shorter write truncates what a longer
// one left.
func TestWriteInPlace(t *testing.T) {
	tests := map[string]struct {
		writes []string
		want   string
	}{
		"new file":          {writes: []string{"first\n"}, want: "first\n"},
		"longer, shorter":   {writes: []string{"a longer first line\n", "short\n"}, want: "short\n"},
		"shorter, longer":   {writes: []string{"short\n", "a longer line again\n"}, want: "a longer line again\n"},
		"emptied, refilled": {writes: []string{"a line\n", "", "again\n"}, want: "again\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f")
			for _, w := range tc.writes {
				if err := WriteInPlace(path, []byte(w), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			b, err := os.ReadFile(path)
			if err != nil || string(b) != tc.want {
				t.Errorf("file holds %q, %v; want %q", b, err, tc.want)
			}
		})
	}
}

// TestWriteInPlaceKeepsFile checks that an existing file is reused, not
// replaced: its inode and mode stay.
func TestWriteInPlaceKeepsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := WriteInPlace(path, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if before.Mode().Perm() != 0o700 {
		t.Errorf("mode %v, want 0700", before.Mode().Perm())
	}
	if err := WriteInPlace(path, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) || after.Mode().Perm() != 0o700 {
		t.Errorf("file replaced or mode changed: %v -> %v", before.Mode(), after.Mode())
	}
	if err := WriteInPlace(filepath.Join(path, "under-a-file"), nil, 0o600); err == nil {
		t.Error("WriteInPlace under a regular file succeeded")
	}
}

// TestReadJSON checks that ReadJSON takes an empty or torn file for
// incomplete, as a file emptied for reuse or cut short must be, and reads
// back what WriteJSON wrote over a longer file.
func TestReadJSON(t *testing.T) {
	tests := map[string]struct {
		content string
		want    map[string]int
		wantErr error
	}{
		"empty":   {content: "", wantErr: ErrIncomplete},
		"torn":    {content: `{"a":1}`, wantErr: ErrIncomplete},
		"whole":   {content: "{\"a\":1}\n", want: map[string]int{"a": 1}},
		"missing": {wantErr: os.ErrNotExist},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f")
			if name != "missing" {
				os.WriteFile(path, []byte(tc.content), 0o600)
			}
			var v map[string]int
			err := ReadJSON(path, &v)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && v["a"] != tc.want["a"]) {
				t.Errorf("ReadJSON = %v, %v; want %v, %v", v, err, tc.want, tc.wantErr)
			}
		})
	}
	t.Run("written over a longer file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "f")
		os.WriteFile(path, []byte(`{"a":1,"b":"a much longer value than the next"}`+"\n"), 0o600)
		if err := WriteJSON(path, map[string]int{"a": 2}); err != nil {
			t.Fatal(err)
		}
		var v map[string]int
		if err := ReadJSON(path, &v); err != nil || len(v) != 1 || v["a"] != 2 {
			t.Errorf("ReadJSON = %v, %v; want map[a:2]", v, err)
		}
	})
}
