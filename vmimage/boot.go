package vmimage

import (
	"fmt"
	"strings"
)

// BaseCmdline is the kernel command line every job VM needs, less the
// host-specific tsc_early_khz (see KernelCmdline). The package
// documentation explains each parameter.
const BaseCmdline = "console=ttyS0 quiet panic=-1 8250.nr_uarts=4 cryptomgr.notests"

// TCGCmdline is added to the kernel command line of a VM that runs under
// TCG (see the package documentation). TCG does not execute speculatively,
// so the guest's Spectre and Meltdown mitigations protect nothing there and
// only cost: retpolines, return-stack filling at every context switch,
// barriers on each user copy, and more code patched at boot.
const TCGCmdline = "mitigations=off"

// KernelCmdline returns the -append value for a job VM: BaseCmdline,
// tsc_early_khz=tscKHz (required under TCG, where without it about one boot
// in eight hangs; pass the host's TSC frequency in kHz), then extra
// parameters such as "corral.hostname=node1". tscKHz <= 0 leaves it out.
func KernelCmdline(tscKHz int, extra ...string) string {
	parts := []string{BaseCmdline}
	if tscKHz > 0 {
		parts = append(parts, fmt.Sprintf("tsc_early_khz=%d", tscKHz))
	}
	parts = append(parts, extra...)
	return strings.Join(parts, " ")
}

// Port is one of the guest's 16550 UARTs beyond the console, as a QEMU
// isa-serial device. Each has its own IRQ: the legacy defaults (IRQ 4 and 3
// shared by pairs of ports) are avoided so that no port can miss an
// interrupt. Under -M microvm the guest learns iobase and IRQ from ACPI.
type Port struct {
	TTY    string // name in the guest
	IOBase int
	IRQ    int
}

// The job's ports. The console (ttyS0: iobase 0x3f8, IRQ 4) is QEMU's
// -serial; it needs no device.
var (
	StdoutPort  = Port{TTY: "ttyS1", IOBase: 0x2f8, IRQ: 3}
	StderrPort  = Port{TTY: "ttyS2", IOBase: 0x3e8, IRQ: 5}
	ControlPort = Port{TTY: "ttyS3", IOBase: 0x2e8, IRQ: 6}
)

// DeviceArg returns the value of QEMU's -device for p, fed by the chardev
// with the given id: "isa-serial,chardev=ID,iobase=0x2f8,irq=3".
func (p Port) DeviceArg(chardev string) string {
	return fmt.Sprintf("isa-serial,chardev=%s,iobase=%#x,irq=%d", chardev, p.IOBase, p.IRQ)
}
