package network

import (
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/warrenhq/warren/internal/network/nsexec"
	"golang.org/x/sys/unix"
)

// Probe checks, in a network namespace of its own that vanishes
// afterwards, that this kernel has what sessions' egress needs: veth
// pairs (vethErr), and nf_tables with everything warren's table uses
// (nftErr): inet NAT chains, redirect, masquerade, reject, log, interval
// and dynamic sets, connlimit. For warren doctor; it changes nothing on
// the host.
func Probe() (vethErr, nftErr error) {
	// A kernel without nf_tables' netlink (no nfnetlink module, as in the
	// VM stage's guest) is told apart first: the netlink library, asked
	// for such a socket inside another namespace, crashes on it rather
	// than returning the error.
	if fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER); err != nil {
		nftErr = fmt.Errorf("no nf_tables netlink socket (is the nf_tables module loaded?): %w", err)
	} else {
		unix.Close(fd)
	}
	defer func() {
		if r := recover(); r != nil {
			nftErr = fmt.Errorf("nf_tables probe failed: %v", r)
		}
	}()
	ns, err := nsexec.New()
	if err != nil {
		return err, err
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return err, err
	}
	defer h.Close()
	vethErr = h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: ifPrefix + "probe0"}, PeerName: "eth0"})
	if nftErr != nil {
		return vethErr, nftErr
	}
	n := newNFT(int(ns))
	n.maxConns = 1
	if err := n.install(DefaultRange, "", blockedSpans(nil, []netip.Prefix{DefaultRange})); err != nil {
		return vethErr, err
	}
	gw := DefaultRange.Addr().Next()
	s := &nftSession{name: "probe", short: "probe0", ifname: ifPrefix + "probe0", gw: gw, addr: gw.Next(), proxyPort: 1}
	p, err := ParsePolicy("allowlist", []string{"example.com", "203.0.113.0/24:443"}, []string{"198.51.100.0/24"}, nil)
	if err != nil {
		return vethErr, err
	}
	if err := n.addSession(s, p); err != nil {
		return vethErr, err
	}
	return vethErr, n.removeSession(s)
}

// Forwarding says whether IPv4 forwarding is on in the daemon's namespace.
func Forwarding() (bool, error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(string(b)) == "1", nil
}

// ForeignForwardDrops lists the chains of other tables (not warren's) on
// the forward hook whose policy is drop: a packet must be accepted by
// every base chain, so such a firewall drops sessions' egress unless it
// accepts the wrn* interfaces.
func ForeignForwardDrops() ([]string, error) {
	c, err := nftables.New()
	if err != nil {
		return nil, err
	}
	chains, err := c.ListChains()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ch := range chains {
		if ch.Table == nil || ch.Table.Name == TableName || ch.Hooknum == nil || *ch.Hooknum != *nftables.ChainHookForward {
			continue
		}
		if ch.Policy != nil && *ch.Policy == nftables.ChainPolicyDrop {
			out = append(out, fmt.Sprintf("%s %s %s", familyName(ch.Table.Family), ch.Table.Name, ch.Name))
		}
	}
	return out, nil
}

func familyName(f nftables.TableFamily) string {
	switch f {
	case nftables.TableFamilyIPv4:
		return "ip"
	case nftables.TableFamilyIPv6:
		return "ip6"
	case nftables.TableFamilyINet:
		return "inet"
	case nftables.TableFamilyBridge:
		return "bridge"
	}
	return fmt.Sprint(f)
}
