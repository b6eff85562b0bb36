package state

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
)

// Hash returns a digest of everything replicated: the snapshot's bytes,
// which hold every job, node, request id, member, setting, QoS, account,
// user and usage figure, the next job id and the index. Replicas that
// applied the same log agree on it; a field that changes it not is a field
// a snapshot would lose (TestHashCoversEveryField).
func (s *State) Hash() string {
	h := sha256.New()
	_ = s.Snapshot().Write(h) // a hash never fails to write
	return hex.EncodeToString(h.Sum(nil))
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
