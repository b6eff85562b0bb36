package display

import (
	"bytes"
	"strings"
	"testing"

	"corral/api"
)

func TestSafe(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"plain ASCII":             {"train.sh", "train.sh"},
		"other scripts":           {"計算 ジョブ — été", "計算 ジョブ — été"},
		"escape sequence":         {"\x1b[2Jowned", `\x1b[2Jowned`},
		"window title (OSC)":      {"\x1b]0;root@host\x07", `\x1b]0;root@host\x07`},
		"newline, tab, CR":        {"a\nb\tc\rd", `a\nb\tc\rd`},
		"NUL and DEL":             {"a\x00b\x7f", `a\x00b\x7f`},
		"C1 control (CSI)":        {"a\u009b2J", `a\u009b2J`},
		"invalid UTF-8":           {"caf\xe9", `caf\xe9`},
		"right-to-left override":  {"job\u202egpj.sh", `job\u202egpj.sh`},
		"line separator":          {"a\u2028b", `a\u2028b`},
		"a backslash stays":       {`C:\path`, `C:\path`},
		"truncated multibyte end": {"ab\xe3\x81", `ab\xe3\x81`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Safe(tc.in); got != tc.want {
				t.Fatalf("Safe(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestSafeTextKeepsLines(t *testing.T) {
	in := "first line\n\tsecond \x1b[2J line\n"
	want := "first line\n\tsecond \\x1b[2J line\n"
	if got := SafeText(in); got != want {
		t.Fatalf("SafeText(%q) = %q, want %q", in, got, want)
	}
}

// hostile is a job whose every text field tries to reach the terminal.
func hostile() api.Job {
	j := runningJob()
	j.Spec.Name = "\x1b[2J\x1b[Hfake"
	j.Spec.User = "bob\x1b]0;pwned\x07"
	j.Spec.Account = "acct\r"
	j.Spec.Comment = "line1\nline2"
	j.Spec.QOS = "q\u202e"
	j.Node = "n1\x1b[31m"
	j.Message = "died\x1b[0m"
	j.State, j.Reason = api.StatePending, api.Reason("Held\x1b[5m")
	return j
}

// TestRenderersEscapeWhatTheyPrint renders a hostile job and node with
// every renderer: no control character but the layout's own newlines (and
// sinfo's spaces) reaches the output.
func TestRenderersEscapeWhatTheyPrint(t *testing.T) {
	j := hostile()
	n := api.Node{NodeInfo: api.NodeInfo{Name: "n\x1b[2J", CPUs: 4, MemMB: 1024, Runner: "vm\x07", Partitions: []string{"p\x1b"},
		Images: []string{"img\x1b"}}, Reason: "disk\x1b[31m bad", Drain: true}
	all := "%a %A %b %B %c %C %d %D %e %E %f %F %h %H %i %I %j %J %k %K %l %L %m %M %n %N %o %O %p %P %q %Q %r %R %S %t %T %u %v %V %w %W %x %X %y %Y %z %Z"
	renders := map[string]func(b *bytes.Buffer) error{
		"squeue":        func(b *bytes.Buffer) error { return Queue(b, []api.Job{j}, QueueOptions{}, t0) },
		"squeue -o all": func(b *bytes.Buffer) error { return Queue(b, []api.Job{j}, QueueOptions{Format: all}, t0) },
		"squeue -l":     func(b *bytes.Buffer) error { return Queue(b, []api.Job{j}, QueueOptions{Long: true}, t0) },
		"scontrol job":  func(b *bytes.Buffer) error { ShowJob(b, &j, t0); return nil },
		"scontrol node": func(b *bytes.Buffer) error { ShowNode(b, &n, t0); return nil },
		"sinfo":         func(b *bytes.Buffer) error { return Nodes(b, []api.Node{n}, nil, NodesOptions{}) },
		"sinfo -N -l": func(b *bytes.Buffer) error {
			return Nodes(b, []api.Node{n}, nil, NodesOptions{NodeOriented: true, Long: true})
		},
		"corral why":      func(b *bytes.Buffer) error { return Why(b, &api.Why{Lines: []string{"Job x\x1b[2J is PENDING"}}) },
		"corral accounts": func(b *bytes.Buffer) error { return Accounts(b, []api.Account{{Name: "a\x1b"}}, nil) },
		"sprio": func(b *bytes.Buffer) error {
			return Priorities(b, []api.PriorityRow{{JobID: 1, User: "u\x1b[2J", Partition: "p\x07"}}, PriorityOptions{})
		},
		"status": func(b *bytes.Buffer) error {
			Status(b, &api.ClusterStatus{Self: "c1\x1b", Leader: "c2\x07", Members: []api.Member{{ID: "c1\x1b", RaftAddr: "r\x1b"}}})
			return nil
		},
	}
	for name, render := range renders {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := render(&b); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			if i := strings.IndexFunc(out, func(r rune) bool { return (r < 0x20 && r != '\n') || r == 0x7f || r == 0x202e }); i >= 0 {
				t.Fatalf("a control character reached the output at byte %d:\n%q", i, out)
			}
			if !strings.Contains(out, `\x1b`) && !strings.Contains(out, `\x07`) {
				t.Fatalf("no escaped value in the output:\n%s", out)
			}
		})
	}
}
