package session

import (
	"context"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/image"
)

// The warm pool keeps Config.PoolSize sandboxes of the default image
// started and waiting (SandboxConfig.Deferred: namespaces, mounts, cgroup
// and agent are up; no shell runs yet). A create that asks for nothing a
// warm sandbox was not made with (the default image, limits, user and
// working directory; no workspace or snapshot) takes one: the sandbox gets
// the session's hostname and its shell starts with the session's
// environment, so the session is indistinguishable from a cold one. Any
// other create starts cold. The pool refills in the background, one sandbox
// at a time and only while no create is in progress, so live requests come
// first. Warm sandboxes are not sessions: they are destroyed at stop, in
// both shutdown modes, and the reconciler leaves them alone.

// warm is a started sandbox waiting for a session.
type warm struct {
	sb     Sandbox
	img    *image.Image // the content it was made from (leased under sb's name)
	user   string
	base   string
	limits Limits
}

type pool struct {
	mu      sync.Mutex
	ready   []*warm
	filling string // the sandbox being started, if any
	wake    chan struct{}
}

func (p *pool) wakeup() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.wake == nil {
		p.wake = make(chan struct{}, 1)
	}
	return p.wake
}

// names are the sandboxes the pool owns, for the reconciler.
func (p *pool) names() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, w := range p.ready {
		out = append(out, w.sb.Name())
	}
	if p.filling != "" {
		out = append(out, p.filling)
	}
	return out
}

// PoolSize is how many warm sandboxes are waiting.
func (m *Manager) PoolSize() int {
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	return len(m.pool.ready)
}

// WarmSandboxes are the names of the sandboxes waiting in the pool.
func (m *Manager) WarmSandboxes() []string {
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	var out []string
	for _, w := range m.pool.ready {
		out = append(out, w.sb.Name())
	}
	return out
}

// takeWarm returns a warm sandbox for the session rec that req asks for,
// or nil when the pool has none that fits.
func (m *Manager) takeWarm(rec *Session, req *CreateRequest) *warm {
	if m.cfg.PoolSize <= 0 || req.Workspace != "" || req.Snapshot != "" || req.User != "" || req.Cwd != "" ||
		rec.Image != m.cfg.DefaultImage {
		return nil
	}
	cur, err := m.images.Get(rec.Image)
	if err != nil {
		return nil
	}
	wake := m.pool.wakeup()
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	for i, w := range m.pool.ready {
		if w.limits != rec.Limits {
			continue
		}
		if w.img.Digest != cur.Digest {
			continue // the image changed under its name; the filler replaces it
		}
		m.pool.ready = append(m.pool.ready[:i], m.pool.ready[i+1:]...)
		select {
		case wake <- struct{}{}:
		default:
		}
		return w
	}
	return nil
}

// createWarm makes the session e from a warm sandbox. ok is false when the
// sandbox would not take the session (it is destroyed; the caller starts
// a cold one); otherwise the session exists, or err says why not.
func (m *Manager) createWarm(ctx context.Context, k key, e *entry, w *warm, req *CreateRequest) (s *Session, ok bool, err error) {
	rec := e.rec
	name := w.sb.Name()
	env := mergeEnv(w.img.Env, rec.Env)
	env = append(env, "HOSTNAME="+rec.ID)
	start := time.Now()
	if err := w.sb.Claim(ctx, rec.ID, env); err != nil {
		m.log.Warn("a warm sandbox would not take a session; starting a cold one", "sandbox", name, "error", err)
		m.discardWarm(ctx, w)
		return nil, false, nil
	}
	e.mu.Lock()
	rec.Name = name
	rec.User = w.user
	if rec.BaseDir == "" {
		rec.BaseDir = w.base
	}
	rec.State = StateRunning
	rec.Pid = w.sb.Pid()
	e.cwd = rec.BaseDir
	e.mu.Unlock()
	// A network is attached after the sandbox starts, warm or cold: a
	// warm sandbox gets it at claim.
	if err := m.attachNetwork(ctx, rec, w.sb, req); err != nil {
		m.discardWarm(ctx, w)
		m.abandon(k, e, err)
		return nil, true, err
	}
	if err := m.store.CreateSession(ctx, rec); err != nil {
		m.detachNetwork(name)
		m.discardWarm(ctx, w)
		m.abandon(k, e, err)
		return nil, true, err
	}
	e.sb = w.sb
	close(e.ready)
	go m.watch(k, e)
	if rec.Labels[hiddenLabel] == "" {
		m.logFor(ctx).Info("session created", "session_id", rec.ID, "tenant", rec.Tenant, "sandbox", name,
			"image", rec.Image, "warm", true, "duration", time.Since(start))
	}
	return e.snapshot(), true, nil
}

func (m *Manager) discardWarm(ctx context.Context, w *warm) {
	if err := w.sb.Destroy(context.WithoutCancel(ctx)); err != nil {
		m.log.Warn("destroy a warm sandbox", "sandbox", w.sb.Name(), "error", err)
		m.rt.Remove(w.sb.Name())
	}
	m.releaseImage(w.sb.Name())
}

// poolLoop keeps the pool full.
func (m *Manager) poolLoop() {
	defer m.reaperWG.Done()
	if m.cfg.PoolSize <= 0 {
		return
	}
	wake := m.pool.wakeup()
	for {
		for m.PoolSize() < m.cfg.PoolSize {
			select {
			case <-m.stop:
				return
			default:
			}
			if m.creating.Load() > 0 || m.CheckDisk() != nil {
				// Live requests first; and no filling a full disk.
				select {
				case <-m.stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				continue
			}
			if err := m.fillOne(); err != nil {
				m.log.Warn("warm pool: could not start a sandbox", "error", err)
				select {
				case <-m.stop:
					return
				case <-time.After(5 * time.Second):
				}
			}
		}
		select {
		case <-m.stop:
			return
		case <-wake:
		case <-time.After(10 * time.Second):
		}
		m.dropStale()
	}
}

// fillOne starts one warm sandbox, made exactly as create would make a
// session that asks for nothing.
func (m *Manager) fillOne() error {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.CreateTimeout)
	defer cancel()
	name := sandboxName()
	m.pool.mu.Lock()
	m.pool.filling = name
	m.pool.mu.Unlock()
	defer func() {
		m.pool.mu.Lock()
		m.pool.filling = ""
		m.pool.mu.Unlock()
	}()
	img, err := m.images.Acquire(name, m.cfg.DefaultImage)
	if err != nil {
		return err
	}
	user, err := m.imageUser(&CreateRequest{}, img)
	if err != nil {
		m.releaseImage(name)
		return err
	}
	base := img.WorkingDir
	if base == "" {
		base = "/workspace"
	}
	l := m.cfg.DefaultLimits
	cfg := &SandboxConfig{
		Name:               name,
		Hostname:           "warren-warm",
		Lower:              []string{img.RootFS},
		BaseDir:            base,
		Env:                mergeEnv(img.Env, nil),
		Shell:              img.Shell,
		MemoryBytes:        l.MemoryMB << 20,
		Pids:               l.Pids,
		CPUs:               l.CPUs,
		DiskBytes:          l.DiskMB << 20,
		User:               user,
		BackgroundLogBytes: m.cfg.BackgroundLogBytes,
		Deferred:           true,
	}
	for _, d := range img.HostDirs {
		cfg.Overlays = append(cfg.Overlays, SandboxOverlay{Source: d, Target: d})
	}
	sb, err := m.rt.Start(ctx, cfg)
	if err != nil {
		m.releaseImage(name)
		return err
	}
	m.pool.mu.Lock()
	m.pool.ready = append(m.pool.ready, &warm{sb: sb, img: img, user: user, base: base, limits: l})
	m.pool.mu.Unlock()
	return nil
}

// dropStale destroys warm sandboxes that can no longer serve: their image
// changed under its name, or they died.
func (m *Manager) dropStale() {
	cur, _ := m.images.Get(m.cfg.DefaultImage)
	m.pool.mu.Lock()
	var keep, drop []*warm
	for _, w := range m.pool.ready {
		dead := false
		select {
		case <-w.sb.Done():
			dead = true
		default:
		}
		if dead || cur == nil || w.img.Digest != cur.Digest || w.limits != m.cfg.DefaultLimits {
			drop = append(drop, w)
		} else {
			keep = append(keep, w)
		}
	}
	m.pool.ready = keep
	m.pool.mu.Unlock()
	for _, w := range drop {
		m.discardWarm(context.Background(), w)
	}
}

// drainPool destroys every warm sandbox (at stop).
func (m *Manager) drainPool(ctx context.Context) {
	m.pool.mu.Lock()
	ws := m.pool.ready
	m.pool.ready = nil
	m.pool.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.discardWarm(ctx, w)
		}()
	}
	wg.Wait()
}
