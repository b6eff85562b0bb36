package pgsink

import (
	"os"
	"strings"
	"testing"
)

// TestSchemaDocumented: docs/accounting-postgres.md lists every column of
// the records table with its type, as the sink creates it.
func TestSchemaDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/accounting-postgres.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, c := range columns {
		if row := "| `" + c.name + "` | " + c.typ + " |"; !strings.Contains(doc, row) {
			t.Errorf("docs/accounting-postgres.md lacks the row %q", row)
		}
	}
}
