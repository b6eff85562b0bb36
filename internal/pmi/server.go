package pmi

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
)

// MaxKVSBytes bounds what a step's ranks may put in all.
const MaxKVSBytes = 64 << 20

// Server is one step's PMI server.
type Server struct {
	jobID   string
	nodeOf  []int // node index of each rank
	mapping string

	mu       sync.Mutex
	kvs      map[string]string
	kvsBytes int
	// nodeAttrs are the attributes the ranks of each node share.
	nodeAttrs map[int]map[string]string
	attrWake  chan struct{} // closed when a node attribute is put
	// fence counts the ranks at the current fence; done is closed when
	// all have arrived.
	fence int
	done  chan struct{}
	// abort is why the step was aborted (a rank asked, or Close), closed
	// once; aborted says it is.
	abort   chan struct{}
	why     error
	conns   map[net.Conn]bool
	closing bool
}

// NewServer makes the PMI server of a step whose ranks run on the nodes
// nodeOf gives (rank → node index); jobID names its key-value space
// (Slurm's "JOB.STEP").
func NewServer(jobID string, nodeOf []int) *Server {
	return &Server{
		jobID: jobID, nodeOf: nodeOf, mapping: ProcessMapping(nodeOf),
		kvs: map[string]string{}, nodeAttrs: map[int]map[string]string{}, attrWake: make(chan struct{}),
		done: make(chan struct{}), abort: make(chan struct{}), conns: map[net.Conn]bool{},
	}
}

// Size is the step's ranks.
func (s *Server) Size() int { return len(s.nodeOf) }

// Aborted is closed when a rank aborts the step (or Close is called);
// Err says why.
func (s *Server) Aborted() <-chan struct{} { return s.abort }

// Err says why the step was aborted, nil when it was not.
func (s *Server) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.why
}

// Close ends every connection and releases every rank waiting at a fence
// with an error.
func (s *Server) Close() {
	s.stop(errors.New("the step's PMI server closed"))
	s.mu.Lock()
	s.closing = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
}

func (s *Server) stop(why error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.why == nil {
		s.why = why
		close(s.abort)
	}
}

// Serve answers the ranks that connect to ln until it is closed.
func (s *Server) Serve(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			c.Close()
			continue
		}
		s.conns[c] = true
		s.mu.Unlock()
		go s.serveConn(c)
	}
}

// conn is one rank's connection.
type conn struct {
	s    *Server
	c    net.Conn
	rank int // -1 until the rank says
}

func (s *Server) serveConn(c net.Conn) {
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	cn := &conn{s: s, c: c, rank: -1}
	r := bufio.NewReaderSize(c, 4096)
	for {
		m, err := readMessage(r)
		if err != nil {
			return
		}
		reply, end := cn.answer(m)
		if reply != nil {
			if t, ok := m.get("thrid"); ok && reply.v2 {
				reply.add("thrid", t)
			}
			if _, err := c.Write(reply.encode()); err != nil {
				return
			}
		}
		if end {
			return
		}
	}
}

// answer handles one message and returns the reply (nil: none) and whether
// the connection ends.
func (cn *conn) answer(m *message) (*message, bool) {
	s := cn.s
	r := &message{v2: m.v2}
	ok := func(cmd string) *message { return r.add("rc", "0").named(cmd) }
	fail := func(cmd, why string) *message {
		if m.v2 {
			return r.add("rc", "-1").add("errmsg", why).named(cmd)
		}
		return r.add("rc", "-1").add("msg", strings.ReplaceAll(why, " ", "_")).named(cmd)
	}
	switch m.cmd {
	// Both wires.
	case "init":
		v, _ := m.get("pmi_version")
		sub, _ := m.get("pmi_subversion")
		r.add("pmi_version", v).add("pmi_subversion", sub)
		return ok("response_to_init"), false
	case "abort":
		msg, _ := m.get("message")
		s.stop(fmt.Errorf("rank %d aborted the step: %s", cn.rank, msg))
		return nil, true
	// PMI-2.
	case "fullinit":
		rank, err := strconv.Atoi(firstOf(m, "pmirank", "pmiid"))
		if err != nil || rank < 0 || rank >= s.Size() {
			return fail("fullinit-response", fmt.Sprintf("rank %q is not one of the step's 0..%d", firstOf(m, "pmirank", "pmiid"), s.Size()-1)), true
		}
		cn.rank = rank
		r.add("pmi-version", "2").add("pmi-subversion", "0").add("rank", strconv.Itoa(rank)).add("size", strconv.Itoa(s.Size())).
			add("appnum", "0").add("debugged", "FALSE").add("pmiverbose", "FALSE")
		return ok("fullinit-response"), false
	case "job-getid":
		return ok("job-getid-response").add("jobid", s.jobID), false
	case "info-getjobattr":
		key, _ := m.get("key")
		if key == "PMI_process_mapping" {
			return ok("info-getjobattr-response").add("found", "TRUE").add("value", s.mapping), false
		}
		return ok("info-getjobattr-response").add("found", "FALSE"), false
	case "info-putnodeattr":
		key, _ := m.get("key")
		val, _ := m.get("value")
		s.putNodeAttr(cn.node(), key, val)
		return ok("info-putnodeattr-response"), false
	case "info-getnodeattr":
		key, _ := m.get("key")
		wait, _ := m.get("wait")
		val, found := s.nodeAttr(cn.node(), key, strings.EqualFold(wait, "TRUE"))
		r.add("found", boolText(found))
		if found {
			r.add("value", val)
		}
		return ok("info-getnodeattr-response"), false
	case "kvs-put":
		key, _ := m.get("key")
		val, _ := m.get("value")
		if err := s.put(key, val); err != nil {
			return fail("kvs-put-response", err.Error()), false
		}
		return ok("kvs-put-response"), false
	case "kvs-get":
		key, _ := m.get("key")
		val, found := s.get(key)
		r.add("found", boolText(found))
		if found {
			r.add("value", val)
		}
		return ok("kvs-get-response"), false
	case "kvs-fence":
		if err := s.wait(); err != nil {
			return fail("kvs-fence-response", err.Error()), true
		}
		return ok("kvs-fence-response"), false
	case "finalize":
		if m.v2 {
			return ok("finalize-response"), true
		}
		return ok("finalize_ack"), true
	// PMI-1.
	case "get_maxes":
		return ok("maxes").add("kvsname_max", "256").add("keylen_max", "256").add("vallen_max", strconv.Itoa(MaxMessage/2)), false
	case "get_appnum":
		return ok("appnum").add("appnum", "0"), false
	case "get_my_kvsname":
		return ok("my_kvsname").add("kvsname", s.jobID), false
	case "get_universe_size":
		return ok("universe_size").add("size", strconv.Itoa(s.Size())), false
	case "put":
		key, _ := m.get("key")
		val, _ := m.get("value")
		if err := s.put(key, val); err != nil {
			return fail("put_result", err.Error()), false
		}
		return ok("put_result").add("msg", "success"), false
	case "get":
		key, _ := m.get("key")
		if key == "PMI_process_mapping" {
			return ok("get_result").add("msg", "success").add("value", s.mapping), false
		}
		if val, found := s.get(key); found {
			return ok("get_result").add("msg", "success").add("value", val), false
		}
		return fail("get_result", "key_"+key+"_not_found"), false
	case "barrier_in":
		if err := s.wait(); err != nil {
			return fail("barrier_out", err.Error()), true
		}
		return ok("barrier_out"), false
	}
	if m.v2 {
		return fail(m.cmd+"-response", "the step's PMI server does not offer "+m.cmd), false
	}
	return fail(m.cmd, "the step's PMI server does not offer "+m.cmd), false
}

// named sets the command of a reply under construction.
func (m *message) named(cmd string) *message {
	m.cmd = cmd
	return m
}

func firstOf(m *message, keys ...string) string {
	for _, k := range keys {
		if v, ok := m.get(k); ok {
			return v
		}
	}
	return ""
}

func boolText(b bool) string {
	if b {
		return "TRUE"
	}
	return "FALSE"
}

// node is the node index of the connection's rank (0 before it says).
func (cn *conn) node() int {
	if cn.rank < 0 || cn.rank >= len(cn.s.nodeOf) {
		return 0
	}
	return cn.s.nodeOf[cn.rank]
}

func (s *Server) put(key, val string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kvsBytes+len(key)+len(val) > MaxKVSBytes {
		return fmt.Errorf("the step's key-value space is full (%d bytes)", MaxKVSBytes)
	}
	s.kvsBytes += len(key) + len(val) - len(s.kvs[key])
	s.kvs[key] = val
	return nil
}

func (s *Server) get(key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.kvs[key]
	return v, ok
}

// wait is a fence (a barrier): it returns once every rank arrived, or
// with an error when the step was aborted.
func (s *Server) wait() error {
	s.mu.Lock()
	done := s.done
	s.fence++
	if s.fence == s.Size() {
		s.fence = 0
		close(s.done)
		s.done = make(chan struct{})
	}
	s.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-s.abort:
		return s.Err()
	}
}

func (s *Server) putNodeAttr(node int, key, val string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nodeAttrs[node] == nil {
		s.nodeAttrs[node] = map[string]string{}
	}
	s.nodeAttrs[node][key] = val
	close(s.attrWake)
	s.attrWake = make(chan struct{})
}

// nodeAttr returns node's attribute key, waiting for it when wait is set
// (until it is put, or the step aborts).
func (s *Server) nodeAttr(node int, key string, wait bool) (string, bool) {
	for {
		s.mu.Lock()
		v, ok := s.nodeAttrs[node][key]
		wake := s.attrWake
		s.mu.Unlock()
		if ok || !wait {
			return v, ok
		}
		select {
		case <-wake:
		case <-s.abort:
			return "", false
		}
	}
}

// ProcessMapping is the PMI_process_mapping job attribute of ranks on the
// nodes nodeOf gives: "(vector,(NODE,1,COUNT),...)", one entry per run of
// consecutive ranks on one node, which MPI reads to know which ranks
// share a node.
func ProcessMapping(nodeOf []int) string {
	var b strings.Builder
	b.WriteString("(vector")
	for i := 0; i < len(nodeOf); {
		j := i + 1
		for j < len(nodeOf) && nodeOf[j] == nodeOf[i] {
			j++
		}
		fmt.Fprintf(&b, ",(%d,1,%d)", nodeOf[i], j-i)
		i = j
	}
	b.WriteString(")")
	return b.String()
}

// TaskEnv is what rank needs in its environment to reach the server at
// addr (host:port): MPICH's PMI client reads these, and speaks PMI-2 for
// MPIR_CVAR_PMI_VERSION=2.
func (s *Server) TaskEnv(addr string, rank int) []string {
	return []string{"PMI_PORT=" + addr, "PMI_RANK=" + strconv.Itoa(rank), "PMI_SIZE=" + strconv.Itoa(s.Size()),
		"PMI_JOBID=" + s.jobID, "MPIR_CVAR_PMI_VERSION=2"}
}
