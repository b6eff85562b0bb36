package procref

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// WriteInPlace writes b to path, reusing the file if there is one (and
// creating it with perm if not). It does not truncate the file first: an
// ext4 file truncated to zero and then written is flushed to disk at close
// (auto_da_alloc), which costs far more than the write. Callers end such
// files in a newline, which their readers check, so one cut short is never
// taken for a whole one.
func WriteInPlace(path string, b []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, perm)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(b, 0)
	var fi os.FileInfo
	if err == nil {
		fi, err = f.Stat()
	}
	// An emptied file is as long as b now; a truncation would be one more
	// inode update.
	if err == nil && fi.Size() > int64(len(b)) {
		err = f.Truncate(int64(len(b)))
	}
	return errors.Join(err, f.Close())
}

// ErrIncomplete is returned by ReadJSON for a file without its final
// newline: one cut short, or emptied for reuse. Readers take it as absent.
var ErrIncomplete = errors.New("incomplete file")

// WriteJSON writes v as one newline-terminated line to path, in place (see
// WriteInPlace): for files nobody reads before they are complete, or for
// which a torn file means the same as none.
func WriteJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return WriteInPlace(path, append(b, '\n'), 0o600)
}

// ReadJSON reads a file written by WriteJSON (or replaced whole with the
// same format) into v. A file without its final newline is ErrIncomplete.
func ReadJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if len(b) == 0 || b[len(b)-1] != '\n' {
		return fmt.Errorf("%s: %w", path, ErrIncomplete)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
