package network

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// TableName is warren's nftables table (family inet). warren creates,
// changes and deletes only this table; every other rule on the host is
// someone else's.
const TableName = "warren"

// ifPrefix starts the name of every session's host-side interface.
const ifPrefix = "wrn"

// logGroup is the NFLOG group the reject rules log denied connections to,
// read by the daemon to record denials ("wa" in ASCII).
const logGroup = 0x7761

// Reasons of denied connections; each is the tail of the NFLOG prefix.
const (
	reasonBlocked  = "always blocked (private, link-local, loopback, multicast or the host)"
	reasonDNS      = "DNS or DNS-over-TLS to a resolver other than the session's"
	reasonNotAllow = "no allowed name resolved to this address"
	reasonDenied   = "address denied by a deny rule"
	reasonIPv6     = "IPv6 egress is not supported"
	reasonQUIC     = "UDP to port 80 or 443 (QUIC, HTTP/3) is refused: names on those ports are checked over TCP, which clients fall back to"
	reasonConnCap  = "the session has as many connections open as it may (network.max_connections)"
)

var reasonCodes = map[byte]string{'b': reasonBlocked, 'd': reasonDNS, 'n': reasonNotAllow, 'x': reasonDenied, '6': reasonIPv6, 'q': reasonQUIC, 'c': reasonConnCap}

var kindCodes = map[byte]string{'b': "blocked", 'd': "other_resolver", 'n': "not_allowed", 'x': "denied_address", '6': "ipv6", 'q': "quic", 'c': "connection_cap"}

// nftSession is what a session owns in the table: its chain, the rules in
// the shared chains that send its packets there (found by their user data,
// the session's name), and the sets of the current policy generation.
type nftSession struct {
	name   string // sandbox name; user data of its rules in shared chains
	short  string
	ifname string
	addr   netip.Addr // the sandbox's address
	gw     netip.Addr // the host side's address: the forwarder
	gen    int
	// dyn holds, per port group, the set of addresses pinned by DNS
	// answers (with timeouts); static the allowed CIDRs of that group.
	dyn, static map[uint16]*nftables.Set
	deny        *nftables.Set
	// conns counts the session's connections (one element, its address,
	// holding a connlimit): the cap on concurrent connections.
	conns *nftables.Set
	// proxyPort is the port of the session's name-checking proxy on gw,
	// where its nat chain redirects TCP to ports 80 and 443.
	proxyPort uint16
}

// natChain holds the session's redirects of ports 80 and 443 to its proxy.
func (s *nftSession) natChain(t *nftables.Table) *nftables.Chain {
	return &nftables.Chain{Name: "p_" + s.short, Table: t}
}

func (s *nftSession) chain(t *nftables.Table) *nftables.Chain {
	return &nftables.Chain{Name: "s_" + s.short, Table: t}
}

// nft drives the table over one network namespace's netlink.
type nft struct {
	nsfd  int // 0: the daemon's own namespace
	table *nftables.Table
	// the shared chains and the always-blocked set
	forward, input, post, pre *nftables.Chain
	blocked                   *nftables.Set
	// maxConns caps each session's concurrent connections (0: no cap).
	maxConns uint32
}

func (n *nft) conn() (*nftables.Conn, error) {
	if n.nsfd > 0 {
		return nftables.New(nftables.WithNetNSFd(n.nsfd))
	}
	return nftables.New()
}

func newNFT(nsfd int) *nft {
	t := &nftables.Table{Name: TableName, Family: nftables.TableFamilyINet}
	accept := nftables.ChainPolicyAccept
	return &nft{
		nsfd:  nsfd,
		table: t,
		forward: &nftables.Chain{Name: "forward", Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept},
		input: &nftables.Chain{Name: "input", Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &accept},
		post: &nftables.Chain{Name: "postrouting", Table: t, Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource, Policy: &accept},
		pre: &nftables.Chain{Name: "prerouting", Table: t, Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest, Policy: &accept},
		blocked: &nftables.Set{Table: t, Name: "blocked4", KeyType: nftables.TypeIPAddr, Interval: true},
	}
}

// exists says whether the table is there (a daemon before this one made it).
func (n *nft) exists() (bool, error) {
	c, err := n.conn()
	if err != nil {
		return false, err
	}
	ts, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return false, err
	}
	for _, t := range ts {
		if t.Name == TableName {
			return true, nil
		}
	}
	return false, nil
}

// remove deletes the table and everything in it.
func (n *nft) remove() error {
	ok, err := n.exists()
	if err != nil || !ok {
		return err
	}
	c, err := n.conn()
	if err != nil {
		return err
	}
	c.DelTable(n.table)
	return c.Flush()
}

// install replaces the table with a fresh one in one transaction: the
// shared chains, the always-blocked set, masquerade of the sessions' range
// out of egress ("" : any interface that is not a session's).
func (n *nft) install(sessions netip.Prefix, egress string, blocked []span) error {
	had, err := n.exists()
	if err != nil {
		return fmt.Errorf("list nftables tables (is nf_tables available?): %w", err)
	}
	c, err := n.conn()
	if err != nil {
		return err
	}
	if had {
		c.DelTable(n.table)
	}
	c.AddTable(n.table)
	if err := c.AddSet(n.blocked, spanElems(blocked)); err != nil {
		return err
	}
	c.AddChain(n.forward)
	c.AddChain(n.input)
	c.AddChain(n.post)
	c.AddChain(n.pre)
	anyWrn := func(key expr.MetaKey) []expr.Any { return ifMatch(key, ifPrefix, true) }
	// Replies to connections a session made, or that the host made into a
	// session (ports), pass; nothing new is forwarded into a session: no
	// session reaches another.
	c.AddRule(&nftables.Rule{Table: n.table, Chain: n.forward, Exprs: cat(anyWrn(expr.MetaKeyOIFNAME), ctEstablished(), accept())})
	c.AddRule(&nftables.Rule{Table: n.table, Chain: n.forward, Exprs: cat(anyWrn(expr.MetaKeyOIFNAME), drop())})
	// The host accepts from a session only replies and DNS to that
	// session's own forwarder (rules per session, inserted before this);
	// the rest (the host's addresses, the daemon's port) is refused at once.
	c.AddRule(&nftables.Rule{Table: n.table, Chain: n.input, Exprs: cat(anyWrn(expr.MetaKeyIIFNAME), ctEstablished(), accept())})
	c.AddRule(&nftables.Rule{Table: n.table, Chain: n.input, Exprs: cat(anyWrn(expr.MetaKeyIIFNAME), l4(unix.IPPROTO_TCP), rejectTCP())})
	c.AddRule(&nftables.Rule{Table: n.table, Chain: n.input, Exprs: cat(anyWrn(expr.MetaKeyIIFNAME), rejectOther())})
	// Masquerade what leaves from the sessions' range.
	post := cat(ipv4(), loadAddr(12), prefixMatch(sessions))
	if egress != "" {
		post = cat(post, ifMatch(expr.MetaKeyOIFNAME, egress, false))
	} else {
		post = cat(post, ifMatchNot(expr.MetaKeyOIFNAME, ifPrefix))
	}
	c.AddRule(&nftables.Rule{Table: n.table, Chain: n.post, Exprs: cat(post, []expr.Any{&expr.Masq{}})})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("install nftables table %s: %w", TableName, err)
	}
	return nil
}

// setBlocked replaces the always-blocked set's contents atomically.
func (n *nft) setBlocked(blocked []span) error {
	c, err := n.conn()
	if err != nil {
		return err
	}
	c.FlushSet(n.blocked)
	if err := c.SetAddElements(n.blocked, spanElems(blocked)); err != nil {
		return err
	}
	return c.Flush()
}

// addSession puts a session's chain, sets and dispatch rules in place.
func (n *nft) addSession(s *nftSession, p Policy) error {
	c, err := n.conn()
	if err != nil {
		return err
	}
	if n.maxConns > 0 {
		s.conns = &nftables.Set{Table: n.table, Name: "k_" + s.short, KeyType: nftables.TypeIPAddr, Dynamic: true}
		if err := c.AddSet(s.conns, nil); err != nil {
			return err
		}
	}
	ch := c.AddChain(s.chain(n.table))
	nat := c.AddChain(s.natChain(n.table))
	if err := n.fillSession(c, s, ch, nat, p, nil); err != nil {
		return err
	}
	n.dispatch(c, s, ch, nat)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("add nftables chain of session %s: %w", s.name, err)
	}
	return nil
}

// dispatch adds (to the batch in c) the session's rules in the shared
// chains, tagged with its name.
func (n *nft) dispatch(c *nftables.Conn, s *nftSession, ch, nat *nftables.Chain) {
	tag := []byte(s.name)
	// Forwarded packets from the session go to its chain; DNS to its own
	// forwarder is accepted (inserted at the top of input: before the
	// catch-all reject).
	c.InsertRule(&nftables.Rule{Table: n.table, Chain: n.forward, UserData: tag,
		Exprs: cat(ifMatch(expr.MetaKeyIIFNAME, s.ifname, false), []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: ch.Name}})})
	c.AddRule(&nftables.Rule{Table: n.table, Chain: n.pre, UserData: tag,
		Exprs: cat(ifMatch(expr.MetaKeyIIFNAME, s.ifname, false), []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: nat.Name}})})
	// In the input chain the session's rules go on top, in this order:
	// DNS to its own forwarder, replies, then everything else to the host
	// refused and logged (the host's addresses, the daemon's port).
	// InsertRule puts each at the top, so they are inserted in reverse.
	in := ifMatch(expr.MetaKeyIIFNAME, s.ifname, false)
	for _, e := range [][]expr.Any{
		cat(in, logDenied(s.short, 'b'), rejectOther()),
		cat(in, l4(unix.IPPROTO_TCP), logDenied(s.short, 'b'), rejectTCP()),
		cat(in, ctEstablished(), accept()),
		cat(in, ipv4(), loadAddr(16), addrMatch(s.gw), l4(unix.IPPROTO_TCP), dport(s.proxyPort), ctDNAT(), accept()),
		cat(in, ipv4(), loadAddr(16), addrMatch(s.gw), l4(unix.IPPROTO_TCP), dport(53), accept()),
		cat(in, ipv4(), loadAddr(16), addrMatch(s.gw), l4(unix.IPPROTO_UDP), dport(53), accept()),
	} {
		if e == nil {
			continue
		}
		c.InsertRule(&nftables.Rule{Table: n.table, Chain: n.input, UserData: tag, Exprs: e})
	}
}

// adoptSession takes over what an earlier daemon left of a session (kept
// by a shutdown with keep): in one transaction its rules in the shared
// chains and its chains' contents are replaced, its old sets deleted and
// new ones made with pins, so its policy never lapses. Its connection
// count (k_) is kept.
func (n *nft) adoptSession(s *nftSession, p Policy, pins map[uint16]map[netip.Addr]time.Duration) error {
	c, err := n.conn()
	if err != nil {
		return err
	}
	hadConns, err := n.purge(c, s.name, s.short, true)
	if err != nil {
		return err
	}
	switch {
	case n.maxConns > 0 && hadConns:
		s.conns = &nftables.Set{Table: n.table, Name: "k_" + s.short, KeyType: nftables.TypeIPAddr, Dynamic: true}
	case n.maxConns > 0:
		s.conns = &nftables.Set{Table: n.table, Name: "k_" + s.short, KeyType: nftables.TypeIPAddr, Dynamic: true}
		if err := c.AddSet(s.conns, nil); err != nil {
			return err
		}
	case hadConns:
		c.DelSet(&nftables.Set{Table: n.table, Name: "k_" + s.short})
	}
	ch, nat := s.chain(n.table), s.natChain(n.table)
	if err := n.fillSession(c, s, ch, nat, p, pins); err != nil {
		return err
	}
	n.dispatch(c, s, ch, nat)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("adopt nftables chain of session %s: %w", s.name, err)
	}
	return nil
}

// purgeSession removes, in one transaction, everything of a session an
// earlier daemon left that this one did not adopt.
func (n *nft) purgeSession(name, short string) error {
	c, err := n.conn()
	if err != nil {
		return err
	}
	if _, err := n.purge(c, name, short, false); err != nil {
		return err
	}
	return c.Flush()
}

// purge adds to the batch in c the deletion of a session's tagged rules in
// the shared chains and of its policy sets (d_, c_, x_), found by name in
// the kernel; its chains are flushed (keep) or deleted with its
// connection-count set. It says whether that set (k_) exists.
func (n *nft) purge(c *nftables.Conn, name, short string, keep bool) (bool, error) {
	for _, ch := range []*nftables.Chain{n.forward, n.input, n.pre} {
		rules, err := c.GetRules(n.table, ch)
		if err != nil {
			return false, err
		}
		for _, r := range rules {
			if string(r.UserData) == name {
				if err := c.DelRule(r); err != nil {
					return false, err
				}
			}
		}
	}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return false, err
	}
	for _, ch := range chains {
		if ch.Table.Name != TableName || (ch.Name != "s_"+short && ch.Name != "p_"+short) {
			continue
		}
		c.FlushChain(ch)
		if !keep {
			c.DelChain(ch)
		}
	}
	sets, err := c.GetSets(n.table)
	if err != nil {
		return false, err
	}
	hadConns := false
	for _, set := range sets {
		switch {
		case set.Name == "k_"+short:
			hadConns = true
			if !keep {
				c.DelSet(set)
			}
		case strings.HasPrefix(set.Name, "d_"+short+"_") || strings.HasPrefix(set.Name, "c_"+short+"_") || strings.HasPrefix(set.Name, "x_"+short+"_"):
			c.DelSet(set)
		}
	}
	return hadConns, nil
}

// updateSession replaces a session's rules and sets with p's in one
// transaction: a packet sees either the old policy or the new one.
// pins are the pinned addresses still allowed under p, per port group,
// with their remaining lifetimes.
func (n *nft) updateSession(s *nftSession, p Policy, pins map[uint16]map[netip.Addr]time.Duration) error {
	c, err := n.conn()
	if err != nil {
		return err
	}
	old := []*nftables.Set{}
	for _, m := range []map[uint16]*nftables.Set{s.dyn, s.static} {
		for _, set := range m {
			old = append(old, set)
		}
	}
	if s.deny != nil {
		old = append(old, s.deny)
	}
	ch, nat := s.chain(n.table), s.natChain(n.table)
	c.FlushChain(ch)
	c.FlushChain(nat)
	for _, set := range old {
		c.DelSet(set)
	}
	// On failure nothing changed in the kernel: keep the old names.
	was := *s
	s.gen++
	err = n.fillSession(c, s, ch, nat, p, pins)
	if err == nil {
		err = c.Flush()
	}
	if err != nil {
		*s = was
		return fmt.Errorf("update nftables chain of session %s: %w", s.name, err)
	}
	return nil
}

// fillSession adds (to the batch in c) the sets of policy p and the rules
// of the session's chain, in order: spoofed sources dropped; packets of
// connections already let through accepted; IPv6, the
// always-blocked ranges and DNS to other resolvers refused; then open
// accepts, or allowlist accepts the pinned addresses and allowed CIDRs of
// each port group, after refusing the deny CIDRs; the rest refused.
func (n *nft) fillSession(c *nftables.Conn, s *nftSession, ch, nat *nftables.Chain, p Policy, pins map[uint16]map[netip.Addr]time.Duration) error {
	s.dyn, s.static, s.deny = map[uint16]*nftables.Set{}, map[uint16]*nftables.Set{}, nil
	add := func(e ...[]expr.Any) { c.AddRule(&nftables.Rule{Table: n.table, Chain: ch, Exprs: cat(e...)}) }
	// The nat chain sends new TCP connections to ports 80 and 443 of
	// allowed addresses to the proxy (proxy.go), which checks the name;
	// what it does not redirect goes on to the filter chain and meets
	// the same refusals as any port.
	addNat := func(e ...[]expr.Any) { c.AddRule(&nftables.Rule{Table: n.table, Chain: nat, Exprs: cat(e...)}) }
	ret := []expr.Any{&expr.Verdict{Kind: expr.VerdictReturn}}
	addNat(ipv4(), loadAddr(16), lookup(n.blocked, false), ret)
	// A connection over the session's cap is not redirected: it goes on
	// to the filter chain, whose cap rule (the same count: the tuple is
	// counted once) refuses and logs it with its real destination.
	if s.conns != nil {
		for _, port := range []uint16{httpPort, httpsPort} {
			addNat(l4(unix.IPPROTO_TCP), dport(port), n.countOver(s), ret)
		}
	}
	redirect := func(match ...[]expr.Any) {
		for _, port := range []uint16{httpPort, httpsPort} {
			addNat(cat(match...), l4(unix.IPPROTO_TCP), dport(port), redirectTo(s.proxyPort))
		}
	}
	refuse := func(code byte, match ...[]expr.Any) {
		pre := cat(match...)
		add(pre, l4(unix.IPPROTO_TCP), logDenied(s.short, code), rejectTCP())
		add(pre, logDenied(s.short, code), rejectOther())
	}
	add(ipv4(), loadAddr(12), addrMatchNot(s.addr), drop())
	// Connections the policy let through go on (a pin that expires
	// does not cut a long download); a policy change ends those it no
	// longer allows by deleting their conntrack entries (conntrack.go).
	add(ctEstablished(), accept())
	// The cap on concurrent connections, before anything accepts a new one
	// (connections to 80 and 443 are counted in the nat chain, before the
	// redirect; the same tuple counts once).
	if e := n.connCap(s, l4(unix.IPPROTO_TCP), rejectTCP()); e != nil {
		add(e)
		add(n.connCap(s, l4not(unix.IPPROTO_TCP), rejectOther()))
	}
	refuse('6', nfproto(unix.NFPROTO_IPV6))
	add(ipv4(), loadAddr(16), lookup(n.blocked, false), l4(unix.IPPROTO_TCP), logDenied(s.short, 'b'), rejectTCP())
	add(ipv4(), loadAddr(16), lookup(n.blocked, false), logDenied(s.short, 'b'), rejectOther())
	for _, port := range []uint16{53, 853} {
		add(l4(unix.IPPROTO_TCP), dport(port), logDenied(s.short, 'd'), rejectTCP())
		add(l4(unix.IPPROTO_UDP), dport(port), logDenied(s.short, 'd'), rejectOther())
	}
	// QUIC would carry names past the check on 80 and 443.
	for _, port := range []uint16{httpPort, httpsPort} {
		add(l4(unix.IPPROTO_UDP), dport(port), logDenied(s.short, 'q'), rejectOther())
	}
	var denyCIDR []span
	for _, r := range p.Deny {
		if !r.IsName() {
			denyCIDR = append(denyCIDR, spanOf(r.Prefix))
		}
	}
	if len(denyCIDR) > 0 {
		s.deny = &nftables.Set{Table: n.table, Name: fmt.Sprintf("x_%s_%d", s.short, s.gen), KeyType: nftables.TypeIPAddr, Interval: true}
		if err := c.AddSet(s.deny, spanElems(merge(denyCIDR))); err != nil {
			return err
		}
		refuse('x', ipv4(), loadAddr(16), lookup(s.deny, false))
		addNat(ipv4(), loadAddr(16), lookup(s.deny, false), ret)
	}
	switch p.Mode {
	case ModeOpen:
		add(ipv4(), accept())
		redirect(ipv4())
	case ModeAllowlist:
		for _, port := range p.portGroups() {
			dyn := &nftables.Set{Table: n.table, Name: fmt.Sprintf("d_%s_%d_%d", s.short, port, s.gen), KeyType: nftables.TypeIPAddr, HasTimeout: true}
			var elems []nftables.SetElement
			for a, ttl := range pins[port] {
				b := a.As4()
				elems = append(elems, nftables.SetElement{Key: b[:], Timeout: ttl})
			}
			if err := c.AddSet(dyn, elems); err != nil {
				return err
			}
			s.dyn[port] = dyn
			var cidrs []span
			for _, r := range p.Allow {
				if !r.IsName() && r.Port == port {
					cidrs = append(cidrs, spanOf(r.Prefix))
				}
			}
			sets := []*nftables.Set{dyn}
			if len(cidrs) > 0 {
				st := &nftables.Set{Table: n.table, Name: fmt.Sprintf("c_%s_%d_%d", s.short, port, s.gen), KeyType: nftables.TypeIPAddr, Interval: true}
				if err := c.AddSet(st, spanElems(merge(cidrs))); err != nil {
					return err
				}
				s.static[port] = st
				sets = append(sets, st)
			}
			for _, set := range sets {
				if port == 0 {
					redirect(ipv4(), loadAddr(16), lookup(set, false))
				} else if port == httpPort || port == httpsPort {
					addNat(ipv4(), loadAddr(16), lookup(set, false), l4(unix.IPPROTO_TCP), dport(port), redirectTo(s.proxyPort))
				}
				if port == 0 {
					add(ipv4(), loadAddr(16), lookup(set, false), accept())
					continue
				}
				for _, proto := range []byte{unix.IPPROTO_TCP, unix.IPPROTO_UDP} {
					add(ipv4(), l4(proto), dport(port), loadAddr(16), lookup(set, false), accept())
				}
			}
		}
	}
	refuse('n')
	return nil
}

// pin adds addresses to a session's set of port group port, each for ttl;
// an address already there is deleted and added again in the same
// transaction so that its timeout starts over.
func (n *nft) pin(set *nftables.Set, addrs []netip.Addr, refresh []netip.Addr, ttl time.Duration) error {
	c, err := n.conn()
	if err != nil {
		return err
	}
	var del, add []nftables.SetElement
	for _, a := range refresh {
		b := a.As4()
		del = append(del, nftables.SetElement{Key: b[:]})
	}
	for _, a := range addrs {
		b := a.As4()
		add = append(add, nftables.SetElement{Key: b[:], Timeout: ttl})
	}
	if len(del) > 0 {
		if err := c.SetDeleteElements(set, del); err != nil {
			return err
		}
	}
	if err := c.SetAddElements(set, add); err != nil {
		return err
	}
	return c.Flush()
}

// removeSession deletes a session's dispatch rules, chain and sets.
func (n *nft) removeSession(s *nftSession) error {
	c, err := n.conn()
	if err != nil {
		return err
	}
	for _, ch := range []*nftables.Chain{n.forward, n.input, n.pre} {
		rules, err := c.GetRules(n.table, ch)
		if err != nil {
			return err
		}
		for _, r := range rules {
			if string(r.UserData) == s.name {
				if err := c.DelRule(r); err != nil {
					return err
				}
			}
		}
	}
	for _, ch := range []*nftables.Chain{s.chain(n.table), s.natChain(n.table)} {
		c.FlushChain(ch)
		c.DelChain(ch)
	}
	for _, m := range []map[uint16]*nftables.Set{s.dyn, s.static} {
		for _, set := range m {
			c.DelSet(set)
		}
	}
	if s.deny != nil {
		c.DelSet(s.deny)
	}
	if s.conns != nil {
		c.DelSet(s.conns)
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("remove nftables chain of session %s: %w", s.name, err)
	}
	return nil
}

// The expression builders below each load into register 1 and compare.

func cat(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func accept() []expr.Any { return []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}} }
func drop() []expr.Any   { return []expr.Any{&expr.Verdict{Kind: expr.VerdictDrop}} }

func rejectTCP() []expr.Any {
	return []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_TCP_RST}}
}

func rejectOther() []expr.Any {
	return []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED}}
}

func logDenied(short string, code byte) []expr.Any {
	return []expr.Any{&expr.Log{Key: 1<<unix.NFTA_LOG_GROUP | 1<<unix.NFTA_LOG_PREFIX | 1<<unix.NFTA_LOG_QTHRESHOLD, Group: logGroup, QThreshold: 1,
		Data: []byte("w:" + short + ":" + string(code))}}
}

// ifMatch matches an interface name, or with prefix set every name that
// starts with name (nft's "wrn*").
func ifMatch(key expr.MetaKey, name string, prefix bool) []expr.Any {
	data := []byte(name)
	if !prefix {
		data = append(data, 0)
	}
	return []expr.Any{&expr.Meta{Key: key, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: data}}
}

func ifMatchNot(key expr.MetaKey, prefix string) []expr.Any {
	return []expr.Any{&expr.Meta{Key: key, Register: 1}, &expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte(prefix)}}
}

func nfproto(p byte) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}}}
}

func ipv4() []expr.Any { return nfproto(unix.NFPROTO_IPV4) }

func l4(proto byte) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}}}
}

func dport(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
	}
}

// loadAddr loads the IPv4 source (offset 12) or destination (16).
func loadAddr(off uint32) []expr.Any {
	return []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: 4}}
}

func addrMatch(a netip.Addr) []expr.Any {
	b := a.As4()
	return []expr.Any{&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b[:]}}
}

func addrMatchNot(a netip.Addr) []expr.Any {
	b := a.As4()
	return []expr.Any{&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: b[:]}}
}

func prefixMatch(p netip.Prefix) []expr.Any {
	s := spanOf(p)
	mask := ^uint32(0) << (32 - p.Bits())
	if p.Bits() == 0 {
		mask = 0
	}
	lo := u32addr(s.lo).As4()
	return []expr.Any{
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: binaryutil.BigEndian.PutUint32(mask), Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: lo[:]},
	}
}

func lookup(set *nftables.Set, invert bool) []expr.Any {
	return []expr.Any{&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID, Invert: invert}}
}

// redirectTo sends the packet to port on the address of the interface it
// came in on (the session's gateway).
func redirectTo(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
		&expr.Redir{RegisterProtoMin: 1, RegisterProtoMax: 1},
	}
}

// connCap refuses (with verdict) a new connection matching match once
// the session has maxConns open: its source address's element in the
// session's conns set counts them (connlimit, which forgets a connection
// when conntrack does). nil when there is no cap.
func (n *nft) connCap(s *nftSession, match []expr.Any, verdict []expr.Any) []expr.Any {
	if s.conns == nil {
		return nil
	}
	return cat(match, ctNew(), n.countOver(s), logDenied(s.short, 'c'), verdict)
}

// countOver counts the packet's connection in the session's conns set
// and matches when the session is over its cap.
func (n *nft) countOver(s *nftSession) []expr.Any {
	return cat(ipv4(), loadAddr(12), []expr.Any{&expr.Dynset{
		SrcRegKey: 1, SetName: s.conns.Name, SetID: s.conns.ID, Operation: unix.NFT_DYNSET_OP_ADD,
		Exprs: []expr.Any{&expr.Connlimit{Count: n.maxConns, Flags: expr.NFT_CONNLIMIT_F_INV}},
	}})
}

func ctNew() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitNEW), Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{0, 0, 0, 0}},
	}
}

func l4not(proto byte) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{proto}}}
}

// ipsDstNAT is IPS_DST_NAT of enum ip_conntrack_status.
const ipsDstNAT = 1 << 5

// ctDNAT matches connections whose destination the nat chain changed:
// the proxy takes only what a session's redirect sent it.
func ctDNAT() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATUS},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(ipsDstNAT), Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{0, 0, 0, 0}},
	}
}

func ctEstablished() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED), Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{0, 0, 0, 0}},
	}
}

// spanElems turns spans into interval set elements: each start, and the
// address after its end marked as an interval end.
func spanElems(spans []span) []nftables.SetElement {
	var out []nftables.SetElement
	for _, s := range spans {
		lo := u32addr(s.lo).As4()
		out = append(out, nftables.SetElement{Key: lo[:]})
		if s.hi != ^uint32(0) {
			hi := u32addr(s.hi + 1).As4()
			out = append(out, nftables.SetElement{Key: hi[:], IntervalEnd: true})
		}
	}
	return out
}
