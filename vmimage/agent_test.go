package vmimage

import (
	"bytes"
	"strings"
	"testing"
)

func frames(t *testing.T, d *FrameDecoder) []Frame {
	t.Helper()
	var out []Frame
	for {
		f, ok := d.Next()
		if !ok {
			return out
		}
		out = append(out, f)
	}
}

func TestFrameDecoderResynchronises(t *testing.T) {
	hello := Frame{Type: FrameHello, Payload: EncodeMessage(Hello{Version: 1, Nonce: "n1"})}
	data := Frame{Type: FrameData, ID: 7, Payload: DataPayload(StreamStdout, []byte("out"))}
	enc := func(fs ...Frame) []byte {
		var b []byte
		for _, f := range fs {
			b = AppendFrame(b, f)
		}
		return b
	}
	full := enc(hello, data)
	tests := map[string]struct {
		in   []byte
		want []Frame
	}{
		"two frames":                        {full, []Frame{hello, data}},
		"garbage first":                     {append([]byte("noise\xc4\xc4\x7a"), full...), []Frame{hello, data}},
		"the tail of an earlier frame":      {append(enc(data)[9:], full...), []Frame{hello, data}},
		"a header whose payload never came": {append(enc(data)[:FrameHeaderSize+1], full...), []Frame{hello, data}},
		"a corrupted payload":               {func() []byte { b := enc(data); b[len(b)-1] ^= 1; return append(b, enc(hello)...) }(), []Frame{hello}},
		"a wrong frame version":             {func() []byte { b := enc(data); b[2] = 2; return append(b, enc(hello)...) }(), []Frame{hello}},
		"an empty payload":                  {enc(Frame{Type: FrameCancel, ID: 3}), []Frame{{Type: FrameCancel, ID: 3, Payload: []byte{}}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			// Byte by byte and all at once must decode the same.
			for _, chunk := range []int{1, 3, len(tc.in)} {
				var d FrameDecoder
				var got []Frame
				for i := 0; i < len(tc.in); i += chunk {
					d.Write(tc.in[i:min(i+chunk, len(tc.in))])
					got = append(got, frames(t, &d)...)
				}
				if len(got) != len(tc.want) {
					t.Fatalf("chunks of %d: got %d frames %+v, want %d", chunk, len(got), got, len(tc.want))
				}
				for i := range got {
					if got[i].Type != tc.want[i].Type || got[i].ID != tc.want[i].ID || !bytes.Equal(got[i].Payload, tc.want[i].Payload) {
						t.Fatalf("chunks of %d: frame %d = %+v, want %+v", chunk, i, got[i], tc.want[i])
					}
				}
			}
		})
	}
}

func TestFrameDecoderResyncAfterAStall(t *testing.T) {
	// A header that claims a long payload holds up a short frame behind
	// it until the reader gives up on it.
	var d FrameDecoder
	long := AppendFrame(nil, Frame{Type: FrameData, ID: 1, Payload: make([]byte, 1000)})
	d.Write(long[:FrameHeaderSize])
	hello := Frame{Type: FrameHello, Payload: []byte(`{}`)}
	d.Write(AppendFrame(nil, hello))
	if f, ok := d.Next(); ok {
		t.Fatalf("got %+v before the stalled frame was given up", f)
	}
	d.Resync()
	f, ok := d.Next()
	if !ok || f.Type != FrameHello {
		t.Fatalf("after Resync: %+v, %v", f, ok)
	}
}

func TestAgentMessagesValidate(t *testing.T) {
	user := AgentUser{Name: "alice", UID: 1000, GID: 1000}
	tests := map[string]struct {
		msg  interface{ Validate() error }
		want string // "" is valid
	}{
		"an exec":                   {&ExecRequest{Argv: []string{"id"}, Env: []string{"PATH=/bin"}, Dir: "/home/alice", User: user}, ""},
		"an exec without argv":      {&ExecRequest{Dir: "/", User: user}, "no command"},
		"an exec with a bad env":    {&ExecRequest{Argv: []string{"id"}, Env: []string{"=x"}, Dir: "/", User: user}, "not NAME=VALUE"},
		"an exec in a relative dir": {&ExecRequest{Argv: []string{"id"}, Dir: "tmp", User: user}, "clean absolute"},
		"an exec with NUL":          {&ExecRequest{Argv: []string{"a\x00b"}, Dir: "/", User: user}, "NUL"},
		"an exec without a user":    {&ExecRequest{Argv: []string{"id"}, Dir: "/"}, "not a user name"},
		"an exec too large":         {&ExecRequest{Argv: []string{strings.Repeat("x", MaxExecBytes)}, Dir: "/", User: user}, "at most"},
		"signal 10 to all":          {&SignalRequest{Signal: 10, Scope: SignalAll}, ""},
		"signal 0":                  {&SignalRequest{Signal: 0, Scope: SignalAll}, "from 1 to 64"},
		"signal to an exec":         {&SignalRequest{Signal: 2, Scope: SignalExec, Exec: 5}, ""},
		"signal to no exec":         {&SignalRequest{Signal: 2, Scope: SignalExec}, "needs the exec"},
		"signal to nowhere":         {&SignalRequest{Signal: 2, Scope: "host"}, "use all, batch or exec"},
		"a file":                    {&FileRequest{Path: "/home/alice/x", User: user, Mode: 0o644}, ""},
		"a file with ..":            {&FileRequest{Path: "/home/../etc/shadow", User: user}, "clean absolute"},
		"a file with setuid mode":   {&FileRequest{Path: "/x", User: user, Mode: 0o4755}, "permission bits"},
		"an end out of range":       {&End{Code: 300}, "out of range"},
		"a hello":                   {&Hello{Version: 1, Nonce: "x"}, ""},
		"a hello without nonce":     {&Hello{Version: 1}, "nonce"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.msg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

func TestDecodeMessageIsStrict(t *testing.T) {
	var h Hello
	if err := DecodeMessage([]byte(`{"version":1,"nonce":"a","extra":1}`), &h); err == nil {
		t.Fatal("an unknown field was accepted")
	}
	if err := DecodeMessage([]byte(`{"version":1,"nonce":"a"} {}`), &h); err == nil {
		t.Fatal("trailing data was accepted")
	}
	if err := DecodeMessage([]byte(`{"version":1,"nonce":"a"}`), &h); err != nil || h.Nonce != "a" {
		t.Fatalf("%+v, %v", h, err)
	}
}

// FuzzFrameDecoder feeds the decoder what either end of the channel may
// see: the guest is the job's and untrusted, and a reconnection leaves
// pieces of frames. Whatever the input, every frame decoded must encode
// back to bytes of the input, the decoder's buffer stays bounded, and the
// same input fed in two pieces decodes to the same frames.
func FuzzFrameDecoder(f *testing.F) {
	f.Add(AppendFrame(nil, Frame{Type: FrameHello, Payload: []byte(`{"version":1,"nonce":"x"}`)}), 5)
	f.Add(append([]byte("\xc4\x7a\x01garbage"), AppendFrame(nil, Frame{Type: FrameData, ID: 9, Payload: []byte{1, 'h', 'i'}})...), 11)
	f.Add([]byte{0xc4, 0x7a, 1, 6, 0, 0, 0, 1, 0, 4, 0, 0}, 3)
	f.Fuzz(func(t *testing.T, in []byte, cut int) {
		if cut < 0 || cut > len(in) {
			cut = len(in) / 2
		}
		decode := func(parts ...[]byte) []Frame {
			var d FrameDecoder
			var out []Frame
			for _, p := range parts {
				d.Write(p)
				for {
					fr, ok := d.Next()
					if !ok {
						break
					}
					out = append(out, fr)
				}
				if d.Buffered() > FrameHeaderSize+MaxFramePayload+len(p) {
					t.Fatalf("decoder holds %d bytes", d.Buffered())
				}
			}
			return out
		}
		whole := decode(in)
		split := decode(in[:cut], in[cut:])
		if len(whole) != len(split) {
			t.Fatalf("whole input gave %d frames, split at %d gave %d", len(whole), cut, len(split))
		}
		for i, fr := range whole {
			if !bytes.Contains(in, AppendFrame(nil, fr)) {
				t.Fatalf("frame %+v is not in the input", fr)
			}
			if fr.Type != split[i].Type || fr.ID != split[i].ID || !bytes.Equal(fr.Payload, split[i].Payload) {
				t.Fatalf("frame %d differs when the input is split", i)
			}
		}
	})
}
