package ctld

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"corral/ctld/state"
	"corral/internal/pki"
)

// forwarder sends writes that reach a follower on to the leader, so clients
// may talk to any member.
type forwarder struct {
	c      *Controller
	client *http.Client
	proxy  *httputil.ReverseProxy
}

func newForwarder(c *Controller) *forwarder {
	// A leader that accepts a connection but never answers must not hold
	// the client forever: writes commit within seconds.
	tr := &http.Transport{
		MaxIdleConnsPerHost: 64, IdleConnTimeout: 60 * time.Second,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		ResponseHeaderTimeout: 60 * time.Second,
	}
	if c.tls != nil {
		tr.TLSClientConfig = c.tls.to(pki.RoleMember)
	}
	f := &forwarder{c: c, client: &http.Client{Transport: tr, Timeout: 5 * time.Second}}
	f.proxy = &httputil.ReverseProxy{
		Transport: tr,
		Rewrite: func(r *httputil.ProxyRequest) {
			addr, _ := r.In.Context().Value(leaderKey{}).(string)
			r.SetURL(&url.URL{Scheme: c.scheme(), Host: addr})
			r.Out.Header.Set("X-Corral-Forwarded", c.cfg.ID)
			// The leader learns from this member who the client proved to
			// be; never from the client.
			r.Out.Header.Del(peerHeader)
			r.Out.Header.Del(peerKeyHeader)
			if id, ok := pki.PeerIdentity(r.In.TLS); ok {
				r.Out.Header.Set(peerHeader, string(id.Role)+"/"+id.Name)
				r.Out.Header.Set(peerKeyHeader, pki.PeerKey(r.In.TLS))
			}
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(w, http.StatusServiceUnavailable, "", "the leader could not be reached ("+err.Error()+"); retry")
		},
	}
	return f
}

type leaderKey struct{}

// forward proxies r to the leader, answering 503 when none is known.
func (f *forwarder) forward(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Corral-Forwarded") != "" {
		// Never bounce a request between members during an election.
		writeError(w, http.StatusServiceUnavailable, "", "controller "+f.c.cfg.ID+" is not the leader either; the cluster is electing one, retry")
		return
	}
	addr, self, ok := f.c.leaderHTTP()
	if !ok || self {
		writeError(w, http.StatusServiceUnavailable, "", "no leader is elected yet; retry in a moment")
		return
	}
	ctx := context.WithValue(r.Context(), leaderKey{}, addr)
	f.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// announce asks the leader to record this member's HTTP address.
func (f *forwarder) announce(ctx context.Context, m state.SetMember) {
	addr, self, ok := f.c.leaderHTTP()
	if !ok || self {
		return
	}
	body, _ := json.Marshal(m)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.c.scheme()+"://"+addr+"/v1/internal/members", bytes.NewReader(body))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.client.Do(req)
	if err == nil {
		resp.Body.Close()
	}
}
