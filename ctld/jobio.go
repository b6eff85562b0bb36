package ctld

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"corral/api"
	"corral/ctld/state"
	"corral/internal/pki"
	"corral/submit"
)

// The job I/O routes reach into a running job: exec (an upgraded
// connection), signals, files and output (streamed bodies). A controller
// checks the job exists and runs, and that the caller may reach into it
// (its owner or an admin; a signal also its account's coordinator), then
// proxies the request to the job's node, which checks it all again
// (noded/jobapi.go). They bypass limitRequests: a stream lasts as long as
// its command or file, so it gets neither the body deadline nor the write
// deadline, and a file's body is not JSON.
//
// The node learns the caller from api.UserHeader: the controller sets it
// to the request's principal, and over TLS the node's job API takes
// requests from controller members only, so no one else can name a user.

// splitJobIO serves the job I/O routes from io and every other request
// from rest.
func splitJobIO(io *http.ServeMux, rest http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := io.Handler(r); pattern != "" {
			io.ServeHTTP(w, r)
			return
		}
		rest.ServeHTTP(w, r)
	})
}

// maxJobIOBody bounds the JSON bodies of exec and signal.
const maxJobIOBody = 1 << 20

type nodeTarget struct {
	job  uint64
	node string
	addr string
	// as is the user the node is told the request comes from: the caller,
	// or, for an admin or coordinator reaching into another's job, the
	// job's owner (the node runs what it is asked as the job's user).
	as string
}

func (c *Controller) jobIO(op string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t, err := c.checkJobIO(r, op)
		if err == errForward {
			c.proxy.forward(w, r)
			return
		}
		if err != nil {
			c.writeErr(w, r, err)
			return
		}
		c.log.Info("job request proxied to its node", "op", op, "job", t.job, "node", t.node, "caller", principalFrom(r).String())
		c.nodeProxy(t).ServeHTTP(w, r)
	}
}

// errForward says a follower should let the leader answer: its own state
// may not show a job that just started yet.
var errForward = fmt.Errorf("forward to the leader")

// checkJobIO checks a job I/O request against the state: the job runs on
// a node that serves a job API, and the caller may reach into it.
func (c *Controller) checkJobIO(r *http.Request, op string) (nodeTarget, error) {
	ref, err := api.ParseJobRef(r.PathValue("id"))
	if err != nil || ref.HasTask {
		return nodeTarget{}, &fieldError{Field: "id", Msg: fmt.Sprintf("%q: give the job id of a running job (a started array task has its own)", r.PathValue("id"))}
	}
	p := principalFrom(r)
	caller := p.name
	if caller == "" {
		return nodeTarget{}, &httpError{status: http.StatusUnauthorized, field: api.UserHeader, msg: "who is asking? send " + api.UserHeader + " (the CLI sends $USER)"}
	}
	var t nodeTarget
	var st api.JobState
	var owner, reason string
	var lvl level
	found := false
	c.fsm.Read(func(s *state.State) {
		j := s.Jobs[ref.ID]
		if j == nil {
			return
		}
		if lvl = viewerOf(s, p).level(j); lvl == hidden {
			return // another tenant's job does not exist for the caller
		}
		found, st, owner, reason = true, j.State, j.Spec.User, string(j.Reason)
		t = nodeTarget{job: j.ID}
		// The run to reach is the job's active allocation on the node
		// the request names (a step's task), else its first: the batch
		// script's node (a migrating job's source answers until it
		// switches over, its destination from then on).
		if want := r.URL.Query().Get("node"); want == "" {
			if a := currentAlloc(s, j); a != nil && a.Active() {
				t.node = a.Node
			}
		} else {
			for _, a := range s.ActiveAllocs(j) {
				if a.Node == want && !a.Leaving {
					t.node = a.Node
					break
				}
			}
		}
		if n := s.Nodes[t.node]; n != nil {
			t.addr = n.APIAddr
		}
	})
	if (!found || st != api.StateRunning) && !c.isLeading() && r.Header.Get("X-Corral-Forwarded") == "" {
		return t, errForward
	}
	switch {
	case !found:
		return t, notFound("job %d: no such job", ref.ID)
	case p.open && caller != owner && caller != "root":
		return t, &httpError{status: http.StatusForbidden, msg: fmt.Sprintf("job %d belongs to %s: only its owner (or root) may reach into it", ref.ID, owner)}
	case !p.open && lvl < owned && (op != "signal" || lvl < managed):
		return t, forbidden("job %d belongs to %s: only its owner or an admin may reach into it (its account's coordinator may also signal it)", ref.ID, owner)
	case st == api.StateSuspended:
		return t, &httpError{status: http.StatusConflict, msg: fmt.Sprintf("job %d is suspended: resume it first (scontrol resume %d)", ref.ID, ref.ID)}
	case st == api.StatePending:
		return t, &httpError{status: http.StatusConflict, msg: fmt.Sprintf("job %d is pending (%s): it has no node to reach yet", ref.ID, reason)}
	case st != api.StateRunning && st != api.StateMigrating:
		return t, &httpError{status: http.StatusConflict, msg: fmt.Sprintf("job %d is %s, not running", ref.ID, st)}
	case t.node == "":
		return t, notFound("job %d does not run on node %s", ref.ID, submit.Shown(r.URL.Query().Get("node")))
	case t.addr == "":
		return t, &httpError{status: http.StatusNotImplemented, msg: fmt.Sprintf("job %d runs on node %s, which serves no job API (start its node daemon with --listen, or upgrade it)", ref.ID, t.node)}
	}
	t.as = caller
	if !p.open && caller != owner {
		t.as = owner
	}
	root, err := checkJobIOBody(r, op, p.open && caller == "root" || !p.open && p.admin())
	if root {
		t.as = "root"
	}
	return t, err
}

// checkJobIOBody checks what the node will check too: the exec request or
// the signal, the file's path. It reports whether the request is an exec
// as root, which only mayRoot may send.
func checkJobIOBody(r *http.Request, op string, mayRoot bool) (root bool, err error) {
	switch op {
	case "exec":
		var req api.ExecRequest
		if err := readJSONBody(r, &req); err != nil {
			return false, err
		}
		if err := req.Validate(); err != nil {
			fe := err.(*api.FieldError)
			return false, &fieldError{Field: fe.Field, Msg: "exec: " + fe.Error()}
		}
		if req.Root && !mayRoot {
			return false, &httpError{status: http.StatusForbidden, field: "root", msg: "only root (an admin) may exec as root"}
		}
		return req.Root, nil
	case "signal":
		var req api.SignalRequest
		if err := readJSONBody(r, &req); err != nil {
			return false, err
		}
		if _, err := api.ParseSignal(req.Signal); err != nil {
			return false, &fieldError{Field: "signal", Msg: err.Error()}
		}
	case "read", "write":
		if err := api.CheckJobPath(r.URL.Query().Get("path")); err != nil {
			return false, &fieldError{Field: "path", Msg: err.Error()}
		}
	}
	return false, nil
}

// readJSONBody decodes a small JSON body strictly and puts it back for
// the proxy.
func readJSONBody(r *http.Request, v any) error {
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxJobIOBody))
	if err != nil {
		return &httpError{status: http.StatusRequestEntityTooLarge, field: "body", msg: fmt.Sprintf("the request body is over %d bytes or could not be read: %v", maxJobIOBody, err)}
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &httpError{status: http.StatusBadRequest, field: "body", msg: "malformed JSON request body: " + err.Error()}
	}
	return nil
}

// newNodeTransport carries proxied job I/O to nodes. An exec answers once
// its command started, which a booting VM may delay: no header timeout.
// Over TLS the member shows its certificate and takes only a node's.
func newNodeTransport(t *clusterTLS) *http.Transport {
	tr := &http.Transport{
		DialContext:     (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		IdleConnTimeout: 60 * time.Second,
	}
	if t != nil {
		tr.TLSClientConfig = t.to(pki.RoleNode)
	}
	return tr
}

// nodeProxy forwards a checked request to the job's node, with the caller
// it was checked for.
func (c *Controller) nodeProxy(t nodeTarget) *httputil.ReverseProxy {
	target, _ := url.Parse(t.addr)
	return &httputil.ReverseProxy{
		Transport:     c.nodes,
		FlushInterval: -1,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Set(api.UserHeader, t.as)
			// The caller's credentials are the controllers' to check,
			// never a node's to see.
			pr.Out.Header.Del("Authorization")
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() == context.Canceled {
				return
			}
			writeError(w, http.StatusBadGateway, "", fmt.Sprintf("job %d: node %s could not be reached at %s (%v); retry", t.job, t.node, t.addr, err))
		},
	}
}
