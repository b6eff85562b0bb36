package submit

import (
	"os"
	"strings"
	"testing"
)

// TestOptionFatesDocumented reads the table of docs/cli.md that gives
// every sbatch option its fate and checks it against the parser: each
// honoured option is one of supportedOptions, each other one has the fate
// otherOptions gives it, and no option is missing from either side.
func TestOptionFatesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start, end := strings.Index(text, "<!-- sbatch-fates -->"), strings.Index(text, "<!-- /sbatch-fates -->")
	if start < 0 || end < start {
		t.Fatal("docs/cli.md has no sbatch-fates table")
	}
	documented := map[string]string{}
	for _, line := range strings.Split(text[start:end], "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.Contains(cells[1], "`--") {
			continue
		}
		name := cells[1][strings.Index(cells[1], "`--")+3:]
		name = name[:strings.IndexByte(name, '`')]
		if _, dup := documented[name]; dup {
			t.Errorf("--%s is in the table twice", name)
		}
		documented[name] = strings.TrimSpace(cells[2])
	}
	want := map[string]string{}
	for _, d := range supportedOptions {
		want[d.Long] = "honoured"
	}
	for _, o := range otherOptions {
		if _, dup := want[o.long]; dup {
			t.Errorf("--%s is both honoured and given a fate", o.long)
		}
		want[o.long] = o.fate.String()
	}
	for name, fate := range want {
		if got, ok := documented[name]; !ok {
			t.Errorf("--%s (%s) is missing from docs/cli.md's table", name, fate)
		} else if got != fate {
			t.Errorf("--%s: docs/cli.md says %q, the parser %q", name, got, fate)
		}
	}
	for name := range documented {
		if _, ok := want[name]; !ok {
			t.Errorf("docs/cli.md lists --%s, which the parser does not know", name)
		}
	}
	if len(want) < 100 {
		t.Errorf("only %d options: Slurm 22.05's sbatch has over 100", len(want))
	}
}
