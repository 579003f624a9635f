package sessiontest

import (
	"maps"
	"sync"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/image"
)

// Images is a session.Images in memory: images by name, and the leases on
// their content by holder.
type Images struct {
	mu     sync.Mutex
	byName map[string]*image.Image
	leases map[string]string // holder -> digest
}

// NewImages returns a store holding the image "base" (digest sha256:b1,
// shell /bin/sh, working directory /workspace).
func NewImages() *Images {
	i := &Images{byName: map[string]*image.Image{}, leases: map[string]string{}}
	i.Put(&image.Image{Name: "base", Digest: "sha256:b1", RootFS: "/images/b1", Shell: "/bin/sh", WorkingDir: "/workspace",
		Env: []string{"PATH=/usr/bin:/bin"}})
	return i
}

// Put stores img under its name, replacing what the name held.
func (i *Images) Put(img *image.Image) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.byName[img.Name] = img
}

// Leases returns the leases, holder to digest.
func (i *Images) Leases() map[string]string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return maps.Clone(i.leases)
}

func (i *Images) getLocked(name string) (*image.Image, error) {
	img := i.byName[name]
	if img == nil {
		return nil, errdefs.New(errdefs.ErrNotFound, "image %q not found", name)
	}
	c := *img
	return &c, nil
}

// Get implements session.Images.
func (i *Images) Get(name string) (*image.Image, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.getLocked(name)
}

// Acquire implements session.Images.
func (i *Images) Acquire(holder, name string) (*image.Image, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if d, ok := i.leases[holder]; ok {
		for _, img := range i.byName {
			if img.Digest == d {
				c := *img
				return &c, nil
			}
		}
	}
	img, err := i.getLocked(name)
	if err != nil {
		return nil, err
	}
	i.leases[holder] = img.Digest
	return img, nil
}

// AcquireDigest implements session.Images.
func (i *Images) AcquireDigest(holder, digest string) (*image.Image, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, img := range i.byName {
		if img.Digest == digest {
			i.leases[holder] = digest
			c := *img
			return &c, nil
		}
	}
	return nil, errdefs.New(errdefs.ErrNotFound, "no image content %s", digest)
}

// Lease implements session.Images.
func (i *Images) Lease(holder string) (string, bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	d, ok := i.leases[holder]
	return d, ok
}

// Release implements session.Images.
func (i *Images) Release(holder string) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	delete(i.leases, holder)
	return nil
}

// RetainLeases implements session.Images.
func (i *Images) RetainLeases(keep func(holder string) bool) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	for h := range i.leases {
		if !keep(h) {
			delete(i.leases, h)
		}
	}
	return nil
}
