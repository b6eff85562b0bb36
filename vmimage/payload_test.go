package vmimage

import (
	"bytes"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// cpioEntry is one entry as readNewc parsed it.
type cpioEntry struct {
	name  string
	mode  uint32
	nlink uint32
	data  string
}

// readNewc parses a newc archive independently of the writer, checking the
// alignment rules the kernel's unpacker relies on.
func readNewc(t *testing.T, raw []byte) []cpioEntry {
	t.Helper()
	var out []cpioEntry
	off := 0
	for {
		if off%4 != 0 {
			t.Fatalf("entry at offset %d: not 4-byte aligned", off)
		}
		if len(raw)-off < newcHeader || string(raw[off:off+6]) != newcMagic {
			t.Fatalf("offset %d: no newc header", off)
		}
		var f [13]uint64
		for i := range f {
			s := string(raw[off+6+8*i : off+14+8*i])
			v, err := strconv.ParseUint(s, 16, 32)
			if err != nil {
				t.Fatalf("offset %d field %d %q: %v", off, i, s, err)
			}
			f[i] = v
		}
		namesize, filesize := int(f[11]), int(f[6])
		nameEnd := off + newcHeader + namesize
		if raw[nameEnd-1] != 0 {
			t.Fatalf("offset %d: name not NUL-terminated", off)
		}
		name := string(raw[off+newcHeader : nameEnd-1])
		dataStart := nameEnd + pad4(nameEnd)
		e := cpioEntry{name: name, mode: uint32(f[1]), nlink: uint32(f[4]), data: string(raw[dataStart : dataStart+filesize])}
		off = dataStart + filesize + pad4(dataStart+filesize)
		if name == trailer {
			if off != len(raw) {
				t.Fatalf("%d bytes after the trailer", len(raw)-off)
			}
			return out
		}
		out = append(out, e)
	}
}

func TestWritePayloadRoundTrip(t *testing.T) {
	tests := map[string]struct {
		p    Payload
		want map[string]string // name -> data
	}{
		"full job": {
			p: Payload{
				Script:  []byte("#!/bin/sh\necho hi\n"),
				Env:     []string{"PATH=/bin", "MULTI=a b\nc", "EMPTY=", "EQ=x=y"},
				Args:    []string{"one two", "", "three\nfour"},
				WorkDir: "/home/u/run",
			},
			want: map[string]string{
				"job/script":  "#!/bin/sh\necho hi\n",
				"job/env":     "PATH=/bin\x00MULTI=a b\nc\x00EMPTY=\x00EQ=x=y\x00",
				"job/args":    "one two\x00\x00three\nfour\x00",
				"job/workdir": "/home/u/run\n",
			},
		},
		// Lengths 1..4 exercise every padding of the data.
		"odd sizes, no args, default workdir": {
			p: Payload{Script: []byte("x"), Env: []string{"A=bc"}},
			want: map[string]string{
				"job/script": "x", "job/env": "A=bc\x00", "job/args": "", "job/workdir": "/\n",
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WritePayload(&buf, tc.p); err != nil {
				t.Fatal(err)
			}
			entries := readNewc(t, buf.Bytes())
			if len(entries) != 5 || entries[0].name != "job" || entries[0].mode != modeDir|0o755 || entries[0].nlink != 2 {
				t.Fatalf("entries = %+v, want the job directory first and four files", entries)
			}
			for _, e := range entries[1:] {
				want, ok := tc.want[e.name]
				if !ok {
					t.Errorf("unexpected entry %q", e.name)
					continue
				}
				if e.data != want {
					t.Errorf("%s = %q, want %q", e.name, e.data, want)
				}
				wantMode := uint32(modeFile | 0o644)
				if e.name == "job/script" {
					wantMode = modeFile | 0o755
				}
				if e.mode != wantMode {
					t.Errorf("%s mode %o, want %o", e.name, e.mode, wantMode)
				}
			}
		})
	}
}

// TestWritePayloadCpioTool checks the archive with GNU cpio, an
// implementation this package did not write.
func TestWritePayloadCpioTool(t *testing.T) {
	cpio, err := exec.LookPath("cpio")
	if err != nil {
		t.Skip("cpio not installed (apt-get install cpio)")
	}
	var buf bytes.Buffer
	if err := WritePayload(&buf, Payload{Script: []byte("echo 1\n"), Env: []string{"A=1"}}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cpio, "-itv", "--quiet")
	cmd.Stdin = bytes.NewReader(buf.Bytes())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cpio -itv: %v\n%s", err, out)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		names = append(names, fields[0][:1]+" "+fields[len(fields)-1])
	}
	got := strings.Join(names, ",")
	if want := "d job,- job/script,- job/env,- job/args,- job/workdir"; got != want {
		t.Errorf("cpio -itv lists %s, want %s\n%s", got, want, out)
	}
}

func TestWritePayloadRejects(t *testing.T) {
	tests := map[string]struct {
		p    Payload
		want string
	}{
		"env without =":      {Payload{Env: []string{"PATH"}}, "add the '='"},
		"env with no name":   {Payload{Env: []string{"=x"}}, "empty variable name"},
		"env value with NUL": {Payload{Env: []string{"A=x\x00y"}}, "NUL"},
		"arg with NUL":       {Payload{Args: []string{"a\x00"}}, "args[0]"},
		"relative workdir":   {Payload{WorkDir: "run"}, "absolute"},
		"workdir newline":    {Payload{WorkDir: "/a\nb"}, "newline"},
		"gateway off the guest's subnet": {Payload{FS: &FS{Kind: ShareNFS, Addr: "10.0.2.2", Port: 2049, Export: "/",
			GuestAddr: "10.0.2.15/24", Gateway: "10.0.3.2"}}, "on the guest's subnet"},
		"nameservers without a gateway": {Payload{FS: &FS{Kind: ShareNFS, Addr: "10.0.2.2", Port: 2049, Export: "/",
			GuestAddr: "10.0.2.15/24", Nameservers: []string{"192.0.2.53"}}}, "without a gateway"},
		"a nameserver that is no address": {Payload{FS: &FS{Kind: ShareNFS, Addr: "10.0.2.2", Port: 2049, Export: "/",
			GuestAddr: "10.0.2.15/24", Gateway: "10.0.2.2", Nameservers: []string{"dns.example"}}}, "nameserver"},
		"a gateway over virtiofs": {Payload{FS: &FS{Kind: ShareVirtiofs, Tag: "t", Gateway: "10.0.2.2"}}, "nfs share's card"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			err := WritePayload(&buf, tc.p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
			}
			if buf.Len() != 0 {
				t.Errorf("wrote %d bytes for a rejected payload", buf.Len())
			}
		})
	}
}

// TestWritePayloadDeterministic: the same job gives the same bytes, so a
// payload can be compared or cached by content.
func TestWritePayloadDeterministic(t *testing.T) {
	p := Payload{Script: []byte("true\n"), Env: []string{"A=1"}, Args: []string{"x"}}
	var a, b bytes.Buffer
	if err := WritePayload(&a, p); err != nil {
		t.Fatal(err)
	}
	if err := WritePayload(&b, p); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two writes of one payload differ")
	}
}

func ExampleWritePayload() {
	var buf bytes.Buffer
	err := WritePayload(&buf, Payload{
		Script:  []byte("#!/bin/sh\necho \"$GREETING\" \"$@\"\n"),
		Env:     []string{"PATH=/usr/bin:/bin", "GREETING=hello"},
		Args:    []string{"world"},
		WorkDir: "/tmp/job",
	})
	fmt.Println(err, buf.Len() > 0)
	// Output: <nil> true
}
