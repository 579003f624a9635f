package network

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The nfnetlink_log protocol (linux/netfilter/nfnetlink_log.h), which
// x/sys does not carry.
const (
	nfulnlMsgPacket = 0
	nfulnlMsgConfig = 1

	nfulaPayload = 9
	nfulaPrefix  = 10

	nfulaCfgCmd     = 1
	nfulaCfgMode    = 2
	nfulaCfgTimeout = 4
	nfulaCfgQthresh = 5

	nfulnlCfgCmdBind  = 1
	nfulnlCopyPacket  = 2
	nflogCopyRange    = 64 // an IPv4 header with options and a port pair
	nfnetlinkV0       = 0
	nflogSocketBuffer = 1 << 20
)

// denialLog reads the packets the reject rules log to logGroup and records
// each as a denial of the session the prefix names. It keeps only the
// headers: addresses, protocol and ports, never payload.
type denialLog struct {
	c *netlink.Conn
}

func openDenialLog(nsfd int) (*denialLog, error) {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: nsfd})
	if err != nil {
		return nil, fmt.Errorf("open nfnetlink_log: %w", err)
	}
	// With the default buffer a burst of denials may overflow it: the
	// reader counts what it lost (ENOBUFS), so a failure here costs records,
	// never the log.
	_ = c.SetReadBuffer(nflogSocketBuffer)
	mode := make([]byte, 6)
	binary.BigEndian.PutUint32(mode, nflogCopyRange)
	mode[4] = nfulnlCopyPacket
	// Each packet is handed over at once (threshold 1, no batching
	// timeout), so a denial is readable by the time the caller asks.
	one, zero := binary.BigEndian.AppendUint32(nil, 1), binary.BigEndian.AppendUint32(nil, 0)
	for _, attr := range []netlink.Attribute{
		{Type: nfulaCfgCmd, Data: []byte{nfulnlCfgCmdBind}},
		{Type: nfulaCfgMode, Data: mode},
		{Type: nfulaCfgQthresh, Data: one},
		{Type: nfulaCfgTimeout, Data: zero},
	} {
		b, err := netlink.MarshalAttributes([]netlink.Attribute{attr})
		if err != nil {
			c.Close()
			return nil, err
		}
		hdr := []byte{unix.AF_UNSPEC, nfnetlinkV0, 0, 0}
		binary.BigEndian.PutUint16(hdr[2:], logGroup)
		_, err = c.Execute(netlink.Message{
			Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_ULOG<<8 | nfulnlMsgConfig), Flags: netlink.Request | netlink.Acknowledge},
			Data:   append(hdr, b...),
		})
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("bind nflog group %d (is another warren using this namespace?): %w", logGroup, err)
		}
	}
	return &denialLog{c: c}, nil
}

// run records denials until the log is closed.
func (l *denialLog) run(m *Manager) {
	for {
		msgs, err := l.c.Receive()
		if err != nil {
			var oe *netlink.OpError
			if errors.As(err, &oe) && errors.Is(oe.Err, unix.ENOBUFS) {
				continue // a flood overran the buffer; later ones still count
			}
			return
		}
		for _, msg := range msgs {
			if msg.Header.Type != netlink.HeaderType(unix.NFNL_SUBSYS_ULOG<<8|nfulnlMsgPacket) || len(msg.Data) < 4 {
				continue
			}
			short, d, ok := parseLogged(msg.Data[4:])
			if !ok {
				continue
			}
			m.mu.Lock()
			s := m.sessions[nameOfLink(ifPrefix+short)]
			m.mu.Unlock()
			if s != nil {
				s.deny(d)
			}
		}
	}
}

func (l *denialLog) close() { l.c.Close() }

// parseLogged reads one logged packet's prefix ("w:<short>:<code>") and
// IPv4 headers.
func parseLogged(b []byte) (string, Denial, bool) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return "", Denial{}, false
	}
	var prefix string
	var pkt []byte
	for ad.Next() {
		switch ad.Type() {
		case nfulaPrefix:
			prefix = strings.TrimRight(string(ad.Bytes()), "\x00")
		case nfulaPayload:
			pkt = ad.Bytes()
		}
	}
	parts := strings.Split(prefix, ":")
	if len(parts) != 3 || parts[0] != "w" || len(parts[2]) != 1 {
		return "", Denial{}, false
	}
	d := Denial{Time: time.Now().UTC(), Reason: reasonCodes[parts[2][0]], Kind: kindCodes[parts[2][0]]}
	if len(pkt) >= 20 && pkt[0]>>4 == 4 {
		dst, _ := netip.AddrFromSlice(pkt[16:20])
		d.Host = dst.String()
		ihl := int(pkt[0]&0x0f) * 4
		switch pkt[9] {
		case unix.IPPROTO_TCP, unix.IPPROTO_UDP:
			d.Proto = map[byte]string{unix.IPPROTO_TCP: "tcp", unix.IPPROTO_UDP: "udp"}[pkt[9]]
			if len(pkt) >= ihl+4 {
				d.Port = binary.BigEndian.Uint16(pkt[ihl+2:])
			}
		case unix.IPPROTO_ICMP:
			d.Proto = "icmp"
		default:
			d.Proto = fmt.Sprintf("ip proto %d", pkt[9])
		}
	} else if len(pkt) >= 40 && pkt[0]>>4 == 6 {
		dst, _ := netip.AddrFromSlice(pkt[24:40])
		d.Host, d.Proto = dst.String(), "ipv6"
	}
	return parts[1], d, true
}
