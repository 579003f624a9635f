package envd

import (
	"context"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/e2b/envd/gen/process"
	"github.com/warrenhq/warren/internal/errdefs"
)

// sessionState is what envd remembers about one session beyond what the
// manager keeps.
type sessionState struct {
	tenant string

	mu sync.Mutex
	// procs maps a warren process id to its E2B face.
	// +checklocks:mu
	procs map[string]*procState
	// pids maps E2B pids back to warren process ids.
	// +checklocks:mu
	pids map[uint32]string
	// nextPid numbers processes whose sandbox pid warren does not know.
	// +checklocks:mu
	nextPid uint32
	// homes caches the users' home directories.
	// +checklocks:mu
	homes map[string]string
	// +checklocks:mu
	watchers map[string]*watcher
}

// procState is a process as envd started it: its E2B config and tag.
type procState struct {
	id     string
	pid    uint32
	config *process.ProcessConfig
	tag    string
}

// state returns the session's state, created on first use; it prunes the
// states of ended sessions now and then.
func (s *Server) state(t Target) *sessionState {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := sessionKey{t.Tenant, t.Session}
	st := s.sessions[k]
	if st == nil {
		st = &sessionState{tenant: t.Tenant, procs: map[string]*procState{}, pids: map[uint32]string{}, nextPid: 1 << 22,
			homes: map[string]string{}, watchers: map[string]*watcher{}}
		s.sessions[k] = st
		if len(s.sessions)%64 == 0 {
			go s.prune()
		}
	}
	return st
}

// prune drops the states of sessions the manager no longer has.
func (s *Server) prune() {
	s.mu.Lock()
	keys := make([]sessionKey, 0, len(s.sessions))
	for k := range s.sessions {
		keys = append(keys, k)
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, k := range keys {
		if _, err := s.mgr.Get(ctx, k.tenant, k.id); errdefs.Is(err, errdefs.ErrNotFound) {
			s.Forget(k.tenant, k.id)
		}
	}
}

// register records a process envd started or first saw, giving it an E2B
// pid: the sandbox's own pid when warren knows it, else a number of its own
// (above the kernel's pid_max default, so the two never meet).
func (st *sessionState) register(id string, sandboxPid int, cfg *process.ProcessConfig, tag string) *procState {
	st.mu.Lock()
	defer st.mu.Unlock()
	if p := st.procs[id]; p != nil {
		if cfg != nil {
			p.config, p.tag = cfg, tag
		}
		return p
	}
	pid := uint32(sandboxPid)
	if sandboxPid <= 0 {
		st.nextPid++
		pid = st.nextPid
	} else if old := st.pids[pid]; old != "" {
		// The kernel reuses a pid only once its process is reaped: the
		// old holder has ended, and E2B forgets ended processes.
		delete(st.procs, old)
	}
	p := &procState{id: id, pid: pid, config: cfg, tag: tag}
	st.procs[id] = p
	st.pids[pid] = id
	return p
}

// lookup finds a process by E2B pid or tag.
func (st *sessionState) lookup(sel *process.ProcessSelector) (*procState, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	switch v := sel.GetSelector().(type) {
	case *process.ProcessSelector_Pid:
		if id := st.pids[v.Pid]; id != "" {
			return st.procs[id], nil
		}
		return nil, errdefs.New(errdefs.ErrNotFound, "process with pid %d not found", v.Pid)
	case *process.ProcessSelector_Tag:
		for _, p := range st.procs {
			if p.tag != "" && p.tag == v.Tag {
				return p, nil
			}
		}
		return nil, errdefs.New(errdefs.ErrNotFound, "process with tag %q not found", v.Tag)
	}
	return nil, errdefs.New(errdefs.ErrInvalidArgument, "a process selector (pid or tag) is required")
}

// forget drops a process that has ended and been reported.
func (st *sessionState) forget(id string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if p := st.procs[id]; p != nil {
		delete(st.pids, p.pid)
		delete(st.procs, id)
	}
}

func (st *sessionState) closeWatchers() {
	st.mu.Lock()
	ws := st.watchers
	st.watchers = map[string]*watcher{}
	st.mu.Unlock()
	for _, w := range ws {
		w.stop()
	}
}
