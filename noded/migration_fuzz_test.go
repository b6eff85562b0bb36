package noded

import (
	"bytes"
	"testing"
)

// FuzzReadPrelude reads arbitrary bytes as a migration stream's prelude,
// as the destination's daemon does with what the source sends: it never
// takes more than maxPrelude, and what writePrelude wrote reads back.
func FuzzReadPrelude(f *testing.F) {
	var b bytes.Buffer
	writePrelude(&b, []byte(`{"handle_key":"AAECAw=="}`))
	f.Add(b.Bytes())
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 3, 'a'})
	f.Fuzz(func(t *testing.T, data []byte) {
		pre, err := readPrelude(bytes.NewReader(data))
		if err != nil {
			return
		}
		if len(pre) > maxPrelude {
			t.Fatalf("a prelude of %d bytes was taken", len(pre))
		}
		var w bytes.Buffer
		if err := writePrelude(&w, pre); err != nil || !bytes.HasPrefix(data, w.Bytes()) {
			t.Fatalf("prelude %q does not write back as it was read (%v)", pre, err)
		}
	})
}
