package network

import (
	"fmt"

	sess "github.com/warrenhq/warren/internal/session"
)

// ForSessions makes m the session manager's network service.
func ForSessions(m *Manager) sess.Network { return sessions{m} }

type sessions struct{ m *Manager }

func (s sessions) parse(p sess.NetworkPolicy) (Policy, error) {
	return ParsePolicy(p.Mode, p.Allow, p.Deny, s.m.Blocked)
}

func (s sessions) Check(p sess.NetworkPolicy) error {
	_, err := s.parse(p)
	return err
}

func (s sessions) Attach(name string, pid int, p sess.NetworkPolicy) (string, error) {
	pol, err := s.parse(p)
	if err != nil {
		return "", err
	}
	info, err := s.m.Attach(name, fmt.Sprintf("/proc/%d/ns/net", pid), pol)
	if err != nil {
		return "", err
	}
	return info.Gateway.String(), nil
}

func (s sessions) Update(name string, p sess.NetworkPolicy) error {
	pol, err := s.parse(p)
	if err != nil {
		return err
	}
	return s.m.Update(name, pol)
}

func (s sessions) Detach(name string) error { return s.m.Detach(name) }

func (s sessions) Denials(name string) ([]sess.NetworkDenial, bool) {
	ds, ok := s.m.Denials(name)
	out := make([]sess.NetworkDenial, len(ds))
	for i, d := range ds {
		out[i] = sess.NetworkDenial{Time: d.Time, Host: d.Host, Port: int(d.Port), Proto: d.Proto, Reason: d.Reason}
	}
	return out, ok
}

func (s sessions) Adopt(name string, pid int) error {
	return s.m.Adopt(name, fmt.Sprintf("/proc/%d/ns/net", pid))
}

func (s sessions) Traffic(name string) (in, out uint64, ok bool) { return s.m.Traffic(name) }

func (s sessions) Policy(name string) (sess.NetworkPolicy, bool) {
	p, ok := s.m.Policy(name)
	if !ok {
		return sess.NetworkPolicy{}, false
	}
	return sess.NetworkPolicy{Mode: string(p.Mode), Allow: Strings(p.Allow), Deny: Strings(p.Deny)}, true
}
