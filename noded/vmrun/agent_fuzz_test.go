package vmrun

import (
	"io"
	"log/slog"
	"net"
	"testing"

	"corral/vmimage"
)

// FuzzAgentReply feeds the node's end of a request what a guest may send
// (the guest is the job's, and untrusted): any frames, in any order. The
// node must never buffer more than the window it granted, never take a
// window larger than the protocol allows, and accept only Ends and
// Starteds that validate.
func FuzzAgentReply(f *testing.F) {
	f.Add([]byte{byte(vmimage.FrameStarted)}, []byte(`{"pid":3}`), []byte{byte(vmimage.FrameData), 1, 'h', 'i'}, []byte{byte(vmimage.FrameEnd)}, []byte(`{"code":2}`))
	f.Add([]byte{byte(vmimage.FrameWindow)}, []byte{0, 0, 4, 0, 0}, []byte{byte(vmimage.FrameClose), 1}, []byte{byte(vmimage.FrameEnd)}, []byte(`{"errno":13,"error":"x"}`))
	f.Fuzz(func(t *testing.T, t1, p1, p2, t3, p3 []byte) {
		local, remote := net.Pipe()
		go io.Copy(io.Discard, remote)
		defer local.Close()
		defer remote.Close()
		s := &agentSession{log: slog.New(slog.NewTextHandler(io.Discard, nil)), conn: local, reqs: map[uint32]*agentReq{}}
		r := s.register(1)
		frame := func(typ, payload []byte) vmimage.Frame {
			ft := vmimage.FrameData
			if len(typ) > 0 {
				ft = vmimage.FrameType(typ[0])
			}
			return vmimage.Frame{Type: ft, ID: 1, Payload: payload}
		}
		// p2 is taken as a data frame's payload many times over: a
		// guest that ignores the window.
		for _, fr := range []vmimage.Frame{frame(t1, p1), frame(nil, p2), frame(nil, p2), frame(nil, p2), frame(nil, p2), frame(nil, p2), frame(t3, p3)} {
			r.take(fr)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		for s := range r.in {
			if r.in[s].Len() > vmimage.AgentWindow {
				t.Fatalf("stream %d holds %d bytes, window %d", s, r.in[s].Len(), vmimage.AgentWindow)
			}
		}
		if r.credit > vmimage.AgentWindow || r.credit < 0 {
			t.Fatalf("credit %d", r.credit)
		}
		if r.end != nil && r.end.Validate() != nil {
			t.Fatalf("took an invalid end %+v", r.end)
		}
		if r.started != nil && r.started.Validate() != nil {
			t.Fatalf("took an invalid start %+v", r.started)
		}
	})
}
