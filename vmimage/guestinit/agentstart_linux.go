//go:build linux

package guestinit

import (
	"fmt"
	"os"
	"time"

	"corral/vmimage"
)

// startAgent starts the guest agent once its port is there (corral.agent=1
// says the host attached one): the kernel modules load and the port
// appears while the job starts, which the agent does not hold up.
func (g *guest) startAgent() {
	a, err := newAgent(nil, g.root, g.reaper, g.logf)
	if err != nil {
		fmt.Fprintf(os.Stderr, "init: agent: %v\n", err)
		return
	}
	g.agent = a
	go func() {
		for _, f := range []string{"virtio", "agent"} {
			if err := g.loadModules(f); err != nil {
				fmt.Fprintf(os.Stderr, "init: agent: %v\n", err)
				return
			}
		}
		dev, err := findAgentPort(vmimage.AgentPortName, 10*time.Second)
		if err != nil {
			fmt.Fprintf(os.Stderr, "init: agent: %v\n", err)
			return
		}
		// A port opens once (EBUSY after): read-write, for good.
		port, err := os.OpenFile(dev, os.O_RDWR, 0)
		if err != nil {
			fmt.Fprintf(os.Stderr, "init: agent: %v\n", err)
			return
		}
		a.port = port
		g.logf("agent on %s", dev)
		a.Serve()
	}()
}
