package vmnet

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// nftConn opens a netfilter connection in the namespace whose descriptor
// is nsFd, or in the caller's own namespace when nsFd < 0.
func nftConn(nsFd int) (*nftables.Conn, error) {
	var opts []nftables.ConnOption
	if nsFd >= 0 {
		opts = append(opts, nftables.WithNetNSFd(nsFd))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("netfilter: %w", err)
	}
	return c, nil
}

// applyTable replaces table t (creating it when missing) in one netfilter
// transaction: the kernel applies all of it or none, so a table is never
// seen half-built, and applying the same table twice leaves one copy.
func applyTable(c *nftables.Conn, t Table) error {
	nt := &nftables.Table{Name: t.Name, Family: tableFamily(t.Bridge)}
	// Adding before deleting makes the delete succeed whether or not the
	// table was there.
	c.AddTable(nt)
	c.DelTable(nt)
	c.AddTable(nt)
	for _, ch := range t.Chains {
		policy := nftables.ChainPolicyAccept
		if ch.Drop {
			policy = nftables.ChainPolicyDrop
		}
		nc := &nftables.Chain{Name: ch.Name, Table: nt, Type: nftables.ChainTypeFilter,
			Priority: nftables.ChainPriorityFilter, Policy: &policy}
		if ch.NAT {
			nc.Type, nc.Priority = nftables.ChainTypeNAT, nftables.ChainPriorityNATSource
		}
		switch ch.Hook {
		case hookInput:
			nc.Hooknum = nftables.ChainHookInput
		case hookForward:
			nc.Hooknum = nftables.ChainHookForward
		case hookOutput:
			nc.Hooknum = nftables.ChainHookOutput
		case hookPostrouting:
			nc.Hooknum = nftables.ChainHookPostrouting
		default:
			return fmt.Errorf("table %s: chain %s: unknown hook %q", t.Name, ch.Name, ch.Hook)
		}
		c.AddChain(nc)
		for _, r := range ch.Rules {
			exprs, err := ruleExprs(r)
			if err != nil {
				return fmt.Errorf("table %s: chain %s: rule %q: %w", t.Name, ch.Name, r, err)
			}
			c.AddRule(&nftables.Rule{Table: nt, Chain: nc, Exprs: exprs})
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("netfilter table %s: %w", t.Name, err)
	}
	return nil
}

// tableFamily is the netfilter family of an IPv4 table, or of a bridge
// one.
func tableFamily(bridge bool) nftables.TableFamily {
	if bridge {
		return nftables.TableFamilyBridge
	}
	return nftables.TableFamilyIPv4
}

// deleteTable removes the IPv4 table name if it is there.
func deleteTable(c *nftables.Conn, name string) error {
	nt := &nftables.Table{Name: name, Family: nftables.TableFamilyIPv4}
	c.AddTable(nt)
	c.DelTable(nt)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("removing netfilter table %s: %w", name, err)
	}
	return nil
}

// HasTable reports whether the node's namespace (the caller's) holds the
// IPv4 table name.
func HasTable(name string) (bool, error) {
	c, err := nftConn(-1)
	if err != nil {
		return false, err
	}
	_, err = c.ListTableOfFamily(name, nftables.TableFamilyIPv4)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, unix.ENOENT) || errors.Is(err, os.ErrNotExist) || strings.Contains(err.Error(), "no such file") {
		return false, nil
	}
	return false, err
}

// ruleExprs translates a rule into netfilter's expressions, as nft(8)
// would compile it.
func ruleExprs(r Rule) ([]expr.Any, error) {
	var e []expr.Any
	ifname := func(key expr.MetaKey, name string, op expr.CmpOp) {
		e = append(e, &expr.Meta{Key: key, Register: 1},
			&expr.Cmp{Op: op, Register: 1, Data: ifnameBytes(name)})
	}
	if r.IIF != "" {
		ifname(expr.MetaKeyIIFNAME, r.IIF, expr.CmpOpEq)
	}
	if r.OIF != "" {
		ifname(expr.MetaKeyOIFNAME, r.OIF, expr.CmpOpEq)
	}
	if r.NotIIF != "" {
		ifname(expr.MetaKeyIIFNAME, r.NotIIF, expr.CmpOpNeq)
	}
	if r.NotOIF != "" {
		ifname(expr.MetaKeyOIFNAME, r.NotOIF, expr.CmpOpNeq)
	}
	if r.SAddr.IsValid() {
		op := expr.CmpOpEq
		if r.NotSAddr {
			op = expr.CmpOpNeq
		}
		e = append(e, addrMatch(12, r.SAddr, op)...)
	}
	if r.DAddr.IsValid() {
		e = append(e, addrMatch(16, r.DAddr, expr.CmpOpEq)...)
	}
	if r.UDPDport != 0 {
		e = append(e,
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_UDP}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(r.UDPDport)})
	}
	if r.VNI != 0 {
		if r.UDPDport == 0 || r.VNI >= 1<<24 {
			return nil, fmt.Errorf("vni %d: a VXLAN network identifier of 24 bits, with the UDP port", r.VNI)
		}
		// The VNI is bytes 4-6 of the VXLAN header, after the UDP
		// header's 8 bytes (IP fragments are reassembled before the
		// input hook, so the header is always there).
		e = append(e,
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 12, Len: 3},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{byte(r.VNI >> 16), byte(r.VNI >> 8), byte(r.VNI)}})
	}
	if r.Established {
		e = append(e,
			&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
				Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED),
				Xor:  make([]byte, 4)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)})
	}
	switch r.Verdict {
	case Accept:
		e = append(e, &expr.Verdict{Kind: expr.VerdictAccept})
	case Drop:
		e = append(e, &expr.Verdict{Kind: expr.VerdictDrop})
	case Masquerade:
		e = append(e, &expr.Masq{})
	case SNAT:
		if !r.To.Is4() {
			return nil, fmt.Errorf("snat to %v: not an IPv4 address", r.To)
		}
		to := r.To.As4()
		e = append(e, &expr.Immediate{Register: 1, Data: to[:]},
			&expr.NAT{Type: expr.NATTypeSourceNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1})
	default:
		return nil, fmt.Errorf("unknown verdict %q", r.Verdict)
	}
	return e, nil
}

// addrMatch compares the IPv4 address at offset (12: source, 16:
// destination) of the network header with prefix p.
func addrMatch(offset uint32, p netip.Prefix, op expr.CmpOp) []expr.Any {
	e := []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4}}
	p = p.Masked()
	if p.Bits() < 32 {
		var mask [4]byte
		for i := 0; i < p.Bits(); i++ {
			mask[i/8] |= 0x80 >> (i % 8)
		}
		e = append(e, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask[:], Xor: make([]byte, 4)})
	}
	a := p.Addr().As4()
	return append(e, &expr.Cmp{Op: op, Register: 1, Data: a[:]})
}

// ifnameBytes is an interface name as netfilter compares it: padded with
// NULs to IFNAMSIZ, so that the match is exact, or, for a name ending in
// *, the bytes before it, which match every name they begin.
func ifnameBytes(name string) []byte {
	if p, ok := strings.CutSuffix(name, "*"); ok {
		return []byte(p)
	}
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}
