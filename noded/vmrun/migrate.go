package vmrun

import (
	"context"
	"encoding/json"
	"fmt"
)

// MigrationBlockers returns why QEMU would refuse to live-migrate the VM
// now, as QEMU itself says it (query-migrate's blocked-reasons): empty when
// nothing blocks a migration. A VM with the virtiofs share is blocked by
// its vhost-user-fs device on QEMU 7.2; the bare initramfs and the NFS
// share are not.
func (v *VM) MigrationBlockers() ([]string, error) {
	r, err := qmpExec(context.Background(), v.st.QMP, "query-migrate")
	if err != nil {
		return nil, v.vmError("query-migrate", err)
	}
	var reply struct {
		Return struct {
			Blocked bool     `json:"blocked"`
			Reasons []string `json:"blocked-reasons"`
		} `json:"return"`
	}
	if err := json.Unmarshal(r[0], &reply); err != nil {
		return nil, fmt.Errorf("QMP query-migrate: %w", err)
	}
	if reply.Return.Blocked && len(reply.Return.Reasons) == 0 {
		return []string{"QEMU reports the migration blocked without a reason"}, nil
	}
	return reply.Return.Reasons, nil
}
