package accounting

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.etcd.io/bbolt"

	"corral/api"
	"corral/ctld/state"
)

// Node facts are the node side of cluster utilization (sreport cluster
// Utilization): from each entry that changed a node's registration,
// liveness or drain, the node's state and size from the entry's time on.
// Like records, they are built from the state after the apply, so every
// member writes the same facts, keyed by (node, time): writing one again
// changes nothing. A node is in the state of its latest fact until the
// next; the last one lasts until now.

var bNode = []byte("node")

// NodeState is how a node's time counts in cluster utilization.
type NodeState uint8

const (
	// NodeUp is a node that takes jobs: its time is allocated, reserved
	// or idle.
	NodeUp NodeState = 1
	// NodeDown is a node that stopped responding (DOWN), or that the
	// controllers drained themselves (its health check failed, or its
	// attestation): sreport's Down.
	NodeDown NodeState = 2
	// NodePlannedDown is a node a person drained: out of service on
	// purpose, as sreport's PLND Down counts nodes powered down on
	// purpose.
	NodePlannedDown NodeState = 3
)

// NodeFact says that Node is in State, with CPUs and GPUs, from At on.
type NodeFact struct {
	Node  string    `json:"node"`
	At    time.Time `json:"at"`
	State NodeState `json:"state"`
	CPUs  int       `json:"cpus"`
	GPUs  int       `json:"gpus,omitempty"`
}

// NodeStateOf classifies node n of state s.
func NodeStateOf(s *state.State, n *state.Node) NodeState {
	switch {
	case n.Down:
		return NodeDown
	case !n.Drain:
		return NodeUp
	case n.ReasonUser == api.HealthCheckUser:
		return NodeDown
	}
	if a := s.Attestations[n.Name]; a != nil && !a.OK {
		return NodeDown
	}
	return NodePlannedDown
}

// factOf is node n's fact from at on.
func factOf(s *state.State, n *state.Node, at time.Time) NodeFact {
	f := NodeFact{Node: n.Name, At: at, State: NodeStateOf(s, n), CPUs: n.CPUs}
	if n.Inventory != nil {
		f.GPUs = len(n.Inventory.GPUs)
	}
	return f
}

// nodeFacts builds the facts of the node changes an apply made, one per
// node (its state after the apply), in node name order.
func nodeFacts(s *state.State, changes []state.NodeChange) []NodeFact {
	at := map[string]time.Time{}
	for _, c := range changes {
		at[c.Node] = c.At
	}
	var out []NodeFact
	for _, name := range slices.Sorted(maps.Keys(at)) {
		if n := s.Nodes[name]; n != nil {
			out = append(out, factOf(s, n, at[name]))
		}
	}
	return out
}

// RestoredNodeFacts are the facts a member that restored a snapshot can
// tell of each node's present state: since the node's reason was set (a
// down or drained node), else since it registered. Written only for the
// nodes the store has no fact of, they are a start for a member that
// never saw the node; a peer's facts, copied later, replace them.
func RestoredNodeFacts(s *state.State) []NodeFact {
	var out []NodeFact
	for _, name := range slices.Sorted(maps.Keys(s.Nodes)) {
		n := s.Nodes[name]
		at := n.Registered
		if !n.ReasonTime.IsZero() && NodeStateOf(s, n) != NodeUp {
			at = n.ReasonTime
		}
		if !at.IsZero() {
			out = append(out, factOf(s, n, at))
		}
	}
	return out
}

// nodeKey is node 0x00 time.
func nodeKey(node string, at time.Time) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(node), 0), timeKey(at))
}

func nodeValue(f *NodeFact) []byte {
	b := []byte{byte(f.State)}
	b = binary.BigEndian.AppendUint32(b, uint32(max(f.CPUs, 0)))
	return binary.BigEndian.AppendUint32(b, uint32(max(f.GPUs, 0)))
}

// putNodeFact writes f; with ifNone, only when the store holds no fact of
// its node.
func (t *writeTx) putNodeFact(f *NodeFact, ifNone bool) error {
	if f.Node == "" || bytes.IndexByte([]byte(f.Node), 0) >= 0 {
		return fmt.Errorf("node fact for %q: a node name is not empty and holds no NUL", f.Node)
	}
	if ifNone {
		p := append([]byte(f.Node), 0)
		if k, _ := t.node.Cursor().Seek(p); k != nil && bytes.HasPrefix(k, p) {
			return nil
		}
	}
	return t.node.Put(nodeKey(f.Node, f.At), nodeValue(f))
}

// NodeFacts returns every fact stored, by node then time.
func (s *Store) NodeFacts() ([]NodeFact, error) {
	var out []NodeFact
	err := s.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bNode).ForEach(func(k, v []byte) error {
			f, err := nodeFactFrom(k, v)
			out = append(out, f)
			return err
		})
	})
	return out, err
}

// nodeFactFrom reads the node bucket's entry k, v.
func nodeFactFrom(k, v []byte) (NodeFact, error) {
	i := bytes.IndexByte(k, 0)
	if i < 1 || len(k) != i+9 || len(v) != 9 {
		return NodeFact{}, fmt.Errorf("the node bucket holds a malformed entry %x; the store is damaged, rebuild it from a peer", k)
	}
	return NodeFact{Node: string(k[:i]), At: keyTime(binary.BigEndian.Uint64(k[i+1:])),
		State: NodeState(v[0]), CPUs: int(binary.BigEndian.Uint32(v[1:])), GPUs: int(binary.BigEndian.Uint32(v[5:]))}, nil
}
