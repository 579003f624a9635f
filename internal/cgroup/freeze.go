package cgroup

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// Freeze stops every process of the session (S and both leaves: the agent
// too, so nothing inside, not even a file call through the API, changes the
// sandbox's files until Thaw) and waits until the kernel reports all of
// them frozen. A frozen task is stopped between system calls, never inside
// one: a write(2) in progress completes first. On v1 it needs the freezer
// controller; without it the freeze fails with ErrUnavailable
// rather than pretending.
//
// Freezes nest: the session stays frozen until every successful Freeze has
// had its Thaw. Two snapshots of one session at once each freeze it, and
// the first to finish must not thaw it under the other's copy (on v2 the
// other's Freeze would then wait for a "frozen 1" that never comes).
//
// Every successful Freeze must be followed by Thaw. Kill thaws as well.
func (s *Session) Freeze(ctx context.Context) error {
	state, want, err := s.freezeFiles()
	if err != nil {
		return err
	}
	on := "FROZEN"
	if s.h.version == 2 {
		on = "1"
	}
	s.freezeMu.Lock()
	if s.freezes == 0 {
		if err := writeFile(state, on); err != nil {
			s.freezeMu.Unlock()
			return fmt.Errorf("freeze cgroup %s: %w", s.name, err)
		}
	}
	s.freezes++
	s.freezeMu.Unlock()
	delay := 100 * time.Microsecond
	for {
		b, err := os.ReadFile(want)
		if err == nil && frozen(s.h.version, string(b)) {
			return nil
		}
		if err == nil && s.h.version == 1 {
			// v1 stays in FREEZING while a task refuses to stop (one in
			// an uninterruptible sleep); writing FROZEN again retries it.
			_ = writeFile(state, "FROZEN") // the next read of the state tells
		}
		select {
		case <-ctx.Done():
			_ = s.Thaw() // the freeze failed; a failed thaw too is the caller's to see in the state
			return fmt.Errorf("freeze cgroup %s: %w", s.name, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(delay*2, 10*time.Millisecond)
	}
}

// Thaw ends one Freeze; the last one lets the session's processes run
// again. Without a Freeze outstanding (a session a crashed daemon left
// frozen) it thaws at once.
func (s *Session) Thaw() error {
	state, _, err := s.freezeFiles()
	if err != nil {
		return err
	}
	s.freezeMu.Lock()
	defer s.freezeMu.Unlock()
	if s.freezes > 0 {
		s.freezes--
	}
	if s.freezes > 0 {
		return nil
	}
	v := "THAWED"
	if s.h.version == 2 {
		v = "0"
	}
	if err := writeFile(state, v); err != nil {
		return fmt.Errorf("thaw cgroup %s: %w", s.name, err)
	}
	return nil
}

// freezeFiles returns the file that sets the freezer's state and the file
// that reports it.
func (s *Session) freezeFiles() (set, report string, err error) {
	if s.h.version == 2 {
		d := s.h.controllerDir("", s.name)
		return d + "/cgroup.freeze", d + "/cgroup.events", nil
	}
	f := s.file("freezer", "", "freezer.state")
	if !exists(f) {
		return "", "", errdefs.New(errdefs.ErrUnavailable, "the cgroup v1 freezer controller is not mounted on this host: sessions cannot be frozen")
	}
	return f, f, nil
}

// frozen reads a freezer's report: v1's freezer.state, v2's cgroup.events.
func frozen(version int, report string) bool {
	if version == 1 {
		return strings.TrimSpace(report) == "FROZEN"
	}
	for _, line := range strings.Split(report, "\n") {
		if strings.TrimSpace(line) == "frozen 1" {
			return true
		}
	}
	return false
}
