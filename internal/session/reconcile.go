package session

import "time"

// reconcileTicks is how many reap intervals pass between two looks for
// sandbox debris (a minute at the default interval).
const reconcileTicks = 60

// reconciler removes, while the daemon runs, what sandboxes left on the
// host that no session owns: the remains of a delete that failed half-way,
// or of a create that crashed. Recover does the same once at start.
func (m *Manager) reconciler() {
	defer m.reaperWG.Done()
	t := time.NewTicker(m.cfg.ReapInterval * reconcileTicks)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		m.Reconcile()
	}
}

// Reconcile makes one pass of the reconciler now: debris unowned on this
// pass and the previous one is removed.
func (m *Manager) Reconcile() {
	m.reconcileMu.Lock()
	defer m.reconcileMu.Unlock()
	m.suspects = m.reconcile(m.suspects)
}

// reconcile removes the leftovers that no session owned on this pass and
// the one before: a sandbox being created right now is owned from before its
// first file exists, and the second look keeps a race with it harmless.
// It returns the names to look at again.
func (m *Manager) reconcile(suspects map[string]bool) map[string]bool {
	left, err := m.rt.Leftovers()
	if err != nil {
		m.log.Warn("reconciler: list sandbox leftovers", "error", err)
		return suspects
	}
	owned := map[string]bool{}
	m.mu.Lock()
	for _, e := range m.live {
		e.mu.Lock()
		owned[e.rec.Name] = true
		e.mu.Unlock()
	}
	m.mu.Unlock()
	for _, n := range m.pool.names() {
		owned[n] = true
	}
	next := map[string]bool{}
	for _, n := range left {
		switch {
		case n == "" || owned[n]:
		case suspects[n]:
			m.log.Info("reconciler: removing sandbox leftovers no session owns", "sandbox", n)
			if err := m.rt.Remove(n); err != nil {
				m.log.Warn("reconciler: could not remove sandbox leftovers", "sandbox", n, "error", err)
				next[n] = true
			} else {
				m.obs.Reconciled(ReconcileRemovedLeftover)
			}
		default:
			next[n] = true
		}
	}
	return next
}
