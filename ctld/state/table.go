package state

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"
)

// command is one entry of the command table: how a type is named, how its
// payload is decoded and how it is applied. Adding a command is adding one
// entry; TestCommandTable checks that every entry has its apply test, and
// that the golden log, the snapshot round trip and the replay into three
// states cover it.
type command struct {
	name string
	// payload returns a new, empty payload to decode an entry into.
	payload func() any
	// apply applies a decoded payload at a Raft index and returns the
	// entry's result: a business outcome (a result type or an error),
	// never a reason to stop.
	apply func(s *State, payload any, index uint64) any
}

// def builds a table entry for payload type P from its apply function.
func def[P any](name string, apply func(s *State, c *P, index uint64) any) command {
	return command{
		name:    name,
		payload: func() any { return new(P) },
		apply:   func(s *State, p any, index uint64) any { return apply(s, p.(*P), index) },
	}
}

// commands is the command table. Types are stored in logs forever: never
// renumber, never reuse; a retired type keeps its entry (and decoder).
var commands = map[CommandType]command{
	CmdSubmitJobs: def("SubmitJobs", func(s *State, c *SubmitJobs, index uint64) any { return s.applySubmit(c, index) }),
	CmdCancelJobs: def("CancelJobs", func(s *State, c *CancelJobs, index uint64) any { return s.applyCancel(c, index) }),
	CmdHoldRelease: def("HoldRelease", func(s *State, c *HoldRelease, _ uint64) any {
		return s.applyHold(c)
	}),
	CmdApplyPlan: def("ApplyPlan", func(s *State, c *ApplyPlan, index uint64) any { return s.applyPlan(c, index) }),
	CmdRegisterNode: def("RegisterNode", func(s *State, c *RegisterNode, index uint64) any {
		return errOrNil(s.applyRegister(c, index))
	}),
	CmdNodeHeartbeats: def("NodeHeartbeats", func(s *State, c *NodeHeartbeats, _ uint64) any {
		s.applyHeartbeats(c)
		return nil
	}),
	CmdJobReports: def("JobReports", func(s *State, c *JobReports, index uint64) any { return s.applyReports(c, index) }),
	CmdNodeDown: def("NodeDown", func(s *State, c *NodeDown, index uint64) any {
		s.applyNodeDown(c, index)
		return nil
	}),
	CmdNodeDrain: def("NodeDrain", func(s *State, c *NodeDrain, _ uint64) any { return errOrNil(s.applyDrain(c)) }),
	CmdSetMember: def("SetMember", func(s *State, c *SetMember, _ uint64) any {
		s.Members[c.ID] = c.HTTPAddr
		return nil
	}),
	CmdSuspendJobs: def("SuspendJobs", func(s *State, c *SuspendJobs, index uint64) any { return s.applySuspend(c, index) }),
	CmdSetConfig:   def("SetConfig", func(s *State, c *SetConfig, _ uint64) any { return errOrNil(s.applySetConfig(c)) }),
	CmdPutQOS:      def("PutQOS", func(s *State, c *PutQOS, _ uint64) any { return errOrNil(s.applyPutQOS(c)) }),
	CmdPutAccount:  def("PutAccount", func(s *State, c *PutAccount, _ uint64) any { return errOrNil(s.applyPutAccount(c)) }),
	CmdPutUser:     def("PutUser", func(s *State, c *PutUser, _ uint64) any { return errOrNil(s.applyPutUser(c)) }),
	CmdUpdateJob:   def("UpdateJob", func(s *State, c *UpdateJob, index uint64) any { return errOrNil(s.applyUpdateJob(c, index)) }),
	CmdPurgeJobs:   def("PurgeJobs", func(s *State, c *PurgeJobs, _ uint64) any { return s.applyPurge(c) }),
	CmdPutPartition: def("PutPartition", func(s *State, c *PutPartition, _ uint64) any {
		return errOrNil(s.applyPutPartition(c))
	}),
	CmdSeedConfig:  def("SeedConfig", func(s *State, c *SeedConfig, _ uint64) any { return s.applySeed(c) }),
	CmdPutToken:    def("PutToken", func(s *State, c *PutToken, _ uint64) any { return errOrNil(s.applyPutToken(c)) }),
	CmdRevokeToken: def("RevokeToken", func(s *State, c *RevokeToken, _ uint64) any { return errOrNil(s.applyRevokeToken(c)) }),
	CmdSetRole:     def("SetRole", func(s *State, c *SetRole, _ uint64) any { return errOrNil(s.applySetRole(c)) }),
	CmdAuditRecords: def("AuditRecords", func(s *State, c *AuditRecords, _ uint64) any {
		return errOrNil(s.applyAudit(c))
	}),
	CmdForgetNodeKey: def("ForgetNodeKey", func(s *State, c *ForgetNodeKey, _ uint64) any {
		return errOrNil(s.applyForgetKey(c))
	}),
	CmdNodeAttest:   def("NodeAttest", func(s *State, c *NodeAttest, _ uint64) any { return errOrNil(s.applyAttest(c)) }),
	CmdUseJoinToken: def("UseJoinToken", func(s *State, c *UseJoinToken, _ uint64) any { return errOrNil(s.applyUseJoin(c)) }),
	CmdRequeueJobs:  def("RequeueJobs", func(s *State, c *RequeueJobs, index uint64) any { return s.applyRequeue(c, index) }),
	CmdMigrateJobs:  def("MigrateJobs", func(s *State, c *MigrateJobs, index uint64) any { return s.applyMigrate(c, index) }),
	CmdMigrationReports: def("MigrationReports", func(s *State, c *MigrationReports, index uint64) any {
		return s.applyMigrationReports(c, index)
	}),
	CmdExpireMigrations: def("ExpireMigrations", func(s *State, c *ExpireMigrations, index uint64) any {
		return s.applyExpireMigrations(c, index)
	}),
	CmdCancelMigrations: def("CancelMigrations", func(s *State, c *CancelMigrations, index uint64) any {
		return s.applyCancelMigrations(c, index)
	}),
	CmdCheckpointJobs: def("CheckpointJobs", func(s *State, c *CheckpointJobs, index uint64) any {
		return s.applyCheckpoint(c, index)
	}),
	CmdCheckpointReports: def("CheckpointReports", func(s *State, c *CheckpointReports, index uint64) any {
		return s.applyCheckpointReports(c, index)
	}),
	CmdRestoreJobs: def("RestoreJobs", func(s *State, c *RestoreJobs, index uint64) any { return s.applyRestore(c, index) }),
	CmdPutReservation: def("PutReservation", func(s *State, c *PutReservation, _ uint64) any {
		return errOrNil(s.applyPutReservation(c))
	}),
	CmdExpireReservations: def("ExpireReservations", func(s *State, c *ExpireReservations, _ uint64) any {
		return s.applyExpireReservations(c)
	}),
	CmdSetNodeFeatures: def("SetNodeFeatures", func(s *State, c *SetNodeFeatures, _ uint64) any {
		return errOrNil(s.applySetNodeFeatures(c))
	}),
	CmdSteps: def("Steps", func(s *State, c *Steps, _ uint64) any { return s.applySteps(c) }),
	CmdMailTimeEvents: def("MailTimeEvents", func(s *State, c *MailTimeEvents, _ uint64) any {
		return s.applyMailTimeEvents(c)
	}),
	CmdClaimNotices: def("ClaimNotices", func(s *State, c *ClaimNotices, _ uint64) any { return s.applyClaimNotices(c) }),
	CmdNoticesDone:  def("NoticesDone", func(s *State, c *NoticesDone, _ uint64) any { return s.applyNoticesDone(c) }),
	CmdTopJobs:      def("TopJobs", func(s *State, c *TopJobs, _ uint64) any { return s.applyTop(c) }),
}

// commandByType is the command table indexed by type, for Apply: an
// array index, where the map's lookup cost the simulator's short entries
// a noticeable part of their apply.
var commandByType = func() (t [256]*command) {
	for ct, c := range commands {
		t[ct] = &c
	}
	return t
}()

// errOrNil turns a nil error into a nil result (not a typed nil).
func errOrNil(err error) any {
	if err == nil {
		return nil
	}
	return err
}

// CommandTypes lists every command type, in numeric order.
func CommandTypes() []CommandType { return slices.Sorted(maps.Keys(commands)) }

func (t CommandType) String() string {
	if c, ok := commands[t]; ok {
		return c.name
	}
	return fmt.Sprintf("CommandType(%d)", uint8(t))
}

// Encode frames a command as one type byte followed by its JSON payload.
func Encode(t CommandType, payload any) ([]byte, error) {
	if _, ok := commands[t]; !ok {
		return nil, fmt.Errorf("encoding command type %d: no such command", uint8(t))
	}
	data, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", t, err)
	}
	out := make([]byte, 0, len(data)+1)
	out = append(out, byte(t))
	return append(out, data...), nil
}

// Decode returns the type and typed payload of a framed command. An empty
// entry, an unknown type and a payload that does not decode are errors a
// replica must treat as fatal: it cannot apply the log, and going on would
// make it diverge.
func Decode(b []byte) (CommandType, any, error) {
	if len(b) == 0 {
		return 0, nil, fmt.Errorf("empty command")
	}
	t := CommandType(b[0])
	c, ok := commands[t]
	if !ok {
		return t, nil, fmt.Errorf("unknown command type %d", uint8(t))
	}
	v := c.payload()
	if err := json.Unmarshal(b[1:], v); err != nil {
		return t, nil, fmt.Errorf("decoding %s: %w", t, err)
	}
	return t, v, nil
}

// Apply applies one decoded command at Raft index and returns its result.
// It is deterministic: the same commands applied to equal states give equal
// states and results on every replica. It sets Index; the nodes whose
// allocations changed are collected for TakeTouched.
func (s *State) Apply(index uint64, t CommandType, payload any) any {
	c := commandByType[t]
	if c == nil {
		panic(fmt.Sprintf("state: applying unknown command type %d", uint8(t)))
	}
	s.applying, s.now = true, time.Time{}
	if st, ok := payload.(stampedAt); ok {
		s.now = st.stamp()
	}
	// Index moves even when the apply panics (the controller contains
	// that): the entry was applied, as far as it went.
	defer func() {
		s.applying = false
		s.Index = index
		s.tidyPending()
		s.tidyNodeNames()
		switch t {
		case CmdPutPartition, CmdSeedConfig, CmdRegisterNode:
			s.partitionList = s.buildPartitionList()
		}
	}()
	return c.apply(s, payload, index)
}

// ForgetTouched forgets the nodes whose allocations changed, keeping the
// list's array: for a caller with no daemons to wake (the simulator).
func (s *State) ForgetTouched() { s.touched = s.touched[:0] }

// TakeTouched returns the nodes whose allocations changed since the last
// call and forgets them: the controller wakes their daemons' watches.
func (s *State) TakeTouched() []string {
	t := s.touched
	s.touched = nil
	return t
}
