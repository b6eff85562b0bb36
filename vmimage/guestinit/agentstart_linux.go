//go:build linux

package guestinit

import (
	"fmt"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"corral/vmimage"
)

// startAgent starts the guest agent once its port is there (corral.agent=1
// says the host attached one): the kernel modules load and the port
// appears while the job starts, which the agent does not hold up.
func (g *guest) startAgent() {
	if g.agent != nil {
		// A warm start's guest has its agent already: it now acts in
		// the job's root.
		if err := g.agent.setRoot(g.root); err != nil {
			fmt.Fprintf(os.Stderr, "init: agent: %v\n", err)
		}
		return
	}
	a, err := newAgent(nil, g.root, g.reaper, g.logf)
	if err != nil {
		fmt.Fprintf(os.Stderr, "init: agent: %v\n", err)
		return
	}
	g.agent = a
	go func() {
		if err := g.loadModulesIdle("virtio", "agent"); err != nil {
			fmt.Fprintf(os.Stderr, "init: agent: %v\n", err)
			return
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
		if err := a.signalOnConnect(port); err != nil {
			g.logf("agent: no signal when the host connects: %v", err)
		}
		g.logf("agent on %s", dev)
		a.Serve()
	}()
}

// agentNice is the nice value of the thread that loads the agent's modules.
const agentNice = 19

// loadModulesIdle loads the modules of the given features on a thread of
// its own at the lowest priority, and returns once they are loaded. The
// agent starts while the job does, and a VM often has one vCPU: at
// normal priority, loading virtio_console took the job's shell about a
// third of a second of that vCPU before its first output under TCG. The
// thread is never handed back to other goroutines (it ends with this
// one), so its priority stays with it.
func (g *guest) loadModulesIdle(features ...string) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if err := unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), agentNice); err != nil {
			g.logf("agent: nice %d: %v", agentNice, err)
		}
		for _, f := range features {
			if err := g.loadModules(f); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	return <-done
}
