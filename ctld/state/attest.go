package state

import (
	"errors"
	"time"
)

// Attestation is the last TPM attestation of a node: when, whether it
// passed and why not, and, once one passed, the endorsement key's
// fingerprint and the attestation key the controllers trust for it.
type Attestation struct {
	At     time.Time `json:"at"`
	OK     bool      `json:"ok"`
	Reason string    `json:"reason,omitempty"`
	EK     string    `json:"ek,omitempty"`
	AK     []byte    `json:"ak,omitempty"`
}

// NodeAttest records a node's attestation. One that failed drains the
// node, if it is registered, with the reason: it gets no new work until an
// operator resumes it.
type NodeAttest struct {
	Now    time.Time `json:"now"`
	Node   string    `json:"node"`
	OK     bool      `json:"ok"`
	Reason string    `json:"reason,omitempty"`
	EK     string    `json:"ek,omitempty"`
	AK     []byte    `json:"ak,omitempty"`
}

func (s *State) applyAttest(c *NodeAttest) error {
	if c.Node == "" {
		return errors.New("an attestation names its node")
	}
	a := &Attestation{At: c.Now, OK: c.OK, Reason: c.Reason, EK: c.EK, AK: c.AK}
	if old := s.Attestations[c.Node]; old != nil && !c.OK {
		a.EK, a.AK = old.EK, old.AK // the key it proved before stays the one to check
	}
	s.Attestations[c.Node] = a
	if n := s.editNode(c.Node); n != nil && !c.OK {
		n.Drain = true
		n.setReason("attestation failed: "+c.Reason, controllerUser, c.Now)
		s.Nodes[c.Node] = n
		s.noteNode(c.Node, c.Now)
	}
	return nil
}
