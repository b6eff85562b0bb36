package ctld

import (
	"errors"

	"github.com/hashicorp/raft"
)

func errorsAs(err error, target any) bool { return errors.As(err, target) }

func rlog(index uint64, data []byte) *raft.Log {
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
}
