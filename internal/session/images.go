package session

import (
	"slices"

	"github.com/warrenhq/warren/internal/image"
)

// Images is what the manager needs of the image store. A session leases
// the content of its image for as long as its sandbox may mount it, so that
// the content outlives a new pull or an import over the name, or the
// name's removal: Acquire at creation (and again, idempotently, when a
// restarted daemon adopts the session), Release when it is deleted.
type Images interface {
	Get(name string) (*image.Image, error)
	// Acquire returns the image called name and leases its content to
	// holder, a sandbox's name; a holder with a lease gets that lease's
	// content back.
	Acquire(holder, name string) (*image.Image, error)
	// Release ends holder's lease, if any.
	Release(holder string) error
	// RetainLeases ends the leases whose holder keep rejects.
	RetainLeases(keep func(holder string) bool) error
}

// imageUser is the user a new session runs as when the request names none:
// the image's own (its config's User), if the sandboxes have user
// namespaces to run it in. Without them every session already runs as an
// unprivileged host user, and the image's user is not applied.
func (m *Manager) imageUser(req *CreateRequest, img *image.Image) (string, error) {
	u := img.User
	if req.User != "" || u == "" || u == "root" || u == "0" || u == "0:0" || !m.rt.Options().UserNS {
		return "", nil
	}
	if !userPattern.MatchString(u) {
		return "", invalid("image %q runs as user %q, which warren cannot resolve; name a user in the request", img.Name, u)
	}
	return u, nil
}

// ImageUsers returns the sessions created from the image called name, the
// sandboxes of stateless runs included, as "tenant/id", sorted. An image
// that sessions use is not removed (the API answers conflict).
func (m *Manager) ImageUsers(name string) []string {
	m.mu.Lock()
	var es []*entry
	var ks []key
	for k, e := range m.live {
		es = append(es, e)
		ks = append(ks, k)
	}
	m.mu.Unlock()
	var out []string
	for i, e := range es {
		e.mu.Lock()
		img := e.rec.Image
		e.mu.Unlock()
		if img == name {
			out = append(out, ks[i].tenant+"/"+ks[i].id)
		}
	}
	slices.Sort(out)
	return out
}

// releaseImage ends the lease of a deleted session's sandbox on its image
// content.
func (m *Manager) releaseImage(sandboxName string) {
	if err := m.images.Release(sandboxName); err != nil {
		m.log.Warn("release the image lease", "sandbox", sandboxName, "error", err)
	}
}

// retainImageLeases ends the image leases of sandboxes that no session
// owns any more: those of a daemon that stopped without deleting them.
func (m *Manager) retainImageLeases(owned map[string]bool) {
	if err := m.images.RetainLeases(func(h string) bool { return owned[h] }); err != nil {
		m.log.Warn("drop stale image leases", "error", err)
	}
}

// keepImage makes sure an adopted session holds a lease on its image
// content (sessions of a daemon from before leases hold none).
func (m *Manager) keepImage(r *Session) {
	if _, err := m.images.Acquire(r.Name, r.Image); err != nil {
		m.log.Warn("lease the image of an adopted session", "session_id", r.ID, "sandbox", r.Name, "image", r.Image, "error", err)
	}
}
