package image

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/warrenhq/warren/internal/errdefs"
)

// OCI images (a pull, an OCI image layout, a `docker save` archive) are
// stored like any other image: their layers are flattened by
// go-containerregistry's mutate.Extract, which applies whiteouts and opaque
// directories, and the flat stream goes through this package's own
// unpacker (modeLayers), with every guard of ImportTar. The image config's
// Env, WorkingDir, User, Entrypoint and Cmd are kept with the content.

// Limits on what an image config may carry into the store.
const (
	maxConfigEnv   = 1024
	maxConfigBytes = 256 << 10
	maxCommandArgs = 4096
)

// ParsePlatform parses "os/arch[/variant]"; "" is the host's platform.
func ParsePlatform(s string) (*v1.Platform, error) {
	if s == "" {
		return &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}, nil
	}
	p, err := v1.ParsePlatform(s)
	if err != nil || p.OS == "" || p.Architecture == "" || strings.ContainsAny(s, " \t\n\x00") {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "invalid platform %q: want os/arch[/variant], such as linux/amd64", s)
	}
	return p, nil
}

// platformOf is the platform an image config names, "" if none.
func platformOf(cf *v1.ConfigFile) string {
	return v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}.String()
}

// checkPlatform refuses an image whose config names a platform other than
// want: its programs would not run here.
func checkPlatform(cf *v1.ConfigFile, want *v1.Platform, what string) error {
	if cf.OS == "" || cf.Architecture == "" {
		return nil
	}
	have := v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}
	if !have.Satisfies(v1.Platform{OS: want.OS, Architecture: want.Architecture, Variant: want.Variant}) {
		return errdefs.New(errdefs.ErrInvalidArgument, "%s is an image for %s, not %s; name the platform to store it anyway", what, have.String(), want.String())
	}
	return nil
}

// pickImage returns the image of idx (or of an index inside it) for want:
// the first manifest whose platform satisfies want, else the first one
// without a platform whose config does. Attestations ("unknown/unknown")
// never match.
func pickImage(idx v1.ImageIndex, want *v1.Platform, what string) (v1.Image, error) {
	var seen []string
	var untagged []v1.Image
	var walk func(idx v1.ImageIndex, depth int) (v1.Image, error)
	walk = func(idx v1.ImageIndex, depth int) (v1.Image, error) {
		if depth > 4 {
			return nil, errdefs.New(errdefs.ErrInvalidArgument, "%s: indexes nested too deep", what)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			return nil, err
		}
		for _, d := range im.Manifests {
			switch {
			case d.MediaType.IsIndex():
				child, err := idx.ImageIndex(d.Digest)
				if err != nil {
					return nil, err
				}
				if img, err := walk(child, depth+1); img != nil || err != nil {
					return img, err
				}
			case d.MediaType.IsImage():
				if d.Platform == nil {
					img, err := idx.Image(d.Digest)
					if err != nil {
						return nil, err
					}
					untagged = append(untagged, img)
					continue
				}
				if d.Platform.OS != "unknown" { // attestations
					seen = append(seen, d.Platform.String())
				}
				if d.Platform.Satisfies(*want) {
					return idx.Image(d.Digest)
				}
			}
		}
		return nil, nil
	}
	img, err := walk(idx, 0)
	if err != nil || img != nil {
		return img, err
	}
	for _, img := range untagged {
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		if checkPlatform(cf, want, what) == nil {
			return img, nil
		}
		seen = append(seen, platformOf(cf))
	}
	slices.Sort(seen)
	seen = slices.Compact(seen)
	if len(seen) == 0 {
		return nil, errdefs.New(errdefs.ErrNotFound, "%s holds no image", what)
	}
	return nil, errdefs.New(errdefs.ErrNotFound, "%s has no image for %s; it has %s", what, want.String(), strings.Join(seen, ", "))
}

// configOf turns an OCI image config into the store's config, checking
// what the sandbox will be given: environment entries "K=V" without NUL,
// an absolute working directory, a bounded command. An image without PATH
// or HOME gets the usual ones, as container runtimes give them.
func configOf(cf *v1.ConfigFile) (config, error) {
	c := cf.Config
	bad := func(format string, args ...any) (config, error) {
		return config{}, errdefs.New(errdefs.ErrInvalidArgument, "image config: "+format, args...)
	}
	if len(c.Env) > maxConfigEnv {
		return bad("%d environment variables; at most %d are allowed", len(c.Env), maxConfigEnv)
	}
	size := 0
	env := make([]string, 0, len(c.Env)+2)
	seen := map[string]bool{}
	for _, kv := range c.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.IndexByte(kv, 0) >= 0 {
			return bad("environment entry %.64q is not NAME=VALUE", kv)
		}
		size += len(kv)
		seen[k] = true
		env = append(env, kv)
	}
	if !seen["PATH"] {
		env = append(env, "PATH="+defaultPath)
	}
	if !seen["HOME"] {
		env = append(env, "HOME=/root") // the user's own home replaces it (the agent)
	}
	wd := c.WorkingDir
	if wd != "" {
		if strings.IndexByte(wd, 0) >= 0 || len(wd) > maxPathLen {
			return bad("invalid working directory %.64q", wd)
		}
		wd = path.Clean("/" + wd)
	}
	if strings.ContainsAny(c.User, "\x00\n") || len(c.User) > 256 {
		return bad("invalid user %.64q", c.User)
	}
	for _, args := range [][]string{c.Entrypoint, c.Cmd} {
		if len(args) > maxCommandArgs {
			return bad("a command of %d words; at most %d are allowed", len(args), maxCommandArgs)
		}
		for _, a := range args {
			if strings.IndexByte(a, 0) >= 0 {
				return bad("a command word contains a NUL byte")
			}
			size += len(a)
		}
	}
	if size > maxConfigBytes {
		return bad("%d bytes of environment and command; at most %d are allowed", size, maxConfigBytes)
	}
	return config{Env: env, WorkingDir: wd, User: c.User, Entrypoint: c.Entrypoint, Cmd: c.Cmd}, nil
}

// provenanceOf describes img, from source.
func provenanceOf(img v1.Image, cf *v1.ConfigFile, source string) (provenance, error) {
	id, err := img.ConfigName()
	if err != nil {
		return provenance{}, err
	}
	layers, err := img.Layers()
	if err != nil {
		return provenance{}, err
	}
	return provenance{Source: source, ImageID: id.String(), Platform: platformOf(cf), Layers: len(layers)}, nil
}

// storeOCI flattens img's layers into a new rootfs and stores it as name;
// unpacked, if not nil, is called between the two.
func (s *Store) storeOCI(ctx context.Context, name string, img v1.Image, cfg config, prov provenance, unpacked func()) (*Image, error) {
	return s.importWith(ctx, name, cfg, prov, func(ctx context.Context, rootfs string) error {
		rc := mutate.Extract(img)
		defer rc.Close() // stops the extracting goroutine if unpacking failed
		if err := s.untar(ctx, rc, rootfs, modeLayers); err != nil {
			return err
		}
		// Extract ends the archive cleanly even when it fails (it closes
		// its tar writer before it reports the error), so a layer it
		// refused looks like a shorter image. Its error comes after the
		// end of the archive.
		if _, err := io.Copy(io.Discard, rc); err != nil {
			if isResourceErr(err) {
				return err
			}
			return classifyReadErr(fmt.Errorf("flatten the layers: %w", err))
		}
		// A shell-less image (distroless) runs with argv; a broken
		// /bin/sh link is a mistake whatever the image.
		if err := checkShell(rootfs, true); err != nil {
			return err
		}
		if unpacked != nil {
			unpacked()
		}
		return nil
	})
}

// stored returns the digest of content flattened from the OCI image config
// id with cfg, "" if there is none: a second pull of an image only points
// the name at it.
func (s *Store) stored(id string, cfg config) string {
	if id == "" {
		return ""
	}
	ents, err := os.ReadDir(s.blobsDir())
	if err != nil {
		return ""
	}
	want, _ := json.Marshal(cfg)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(s.blobsDir(), e.Name(), "image.json"))
		if err != nil {
			continue
		}
		var m metadata
		if json.Unmarshal(b, &m) != nil || m.ImageID != id || !digestRE.MatchString(m.Digest) {
			continue
		}
		if got, _ := json.Marshal(m.config); string(got) == string(want) {
			return m.Digest
		}
	}
	return ""
}

// point points name at the stored content digest.
func (s *Store) point(name, digest string) (*Image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := os.Lstat(filepath.Join(s.blobDir(digest), "image.json")); err != nil {
		return nil, errdefs.New(errdefs.ErrNotFound, "content %s is gone", digest)
	}
	old, had := s.names[name]
	s.names[name] = digest
	if err := s.saveNamesLocked(); err != nil {
		if had {
			s.names[name] = old
		} else {
			delete(s.names, name)
		}
		return nil, err
	}
	return s.load(name, digest)
}

// ImportOCILayout imports the OCI image layout that the tar r holds (plain
// or gzip-compressed; only directories and regular files) as the image
// called name: the image of index.json for platform ("" is the host's).
func (s *Store) ImportOCILayout(ctx context.Context, name string, r io.Reader, platform string) (*Image, error) {
	if err := checkImportName(name); err != nil {
		return nil, err
	}
	want, err := ParsePlatform(platform)
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(s.tmpDir(), "layout-*")
	if err != nil {
		return nil, fmt.Errorf("import image %q: %w", name, err)
	}
	defer os.RemoveAll(work)
	if err := s.untar(ctx, r, work, modePlain); err != nil {
		return nil, fmt.Errorf("import image %q: %w", name, err)
	}
	idx, err := layout.ImageIndexFromPath(work)
	if err != nil {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "import image %q: not an OCI image layout: %v", name, errors.Unwrap(err))
	}
	img, err := pickImage(idx, want, "the OCI layout")
	if err != nil {
		return nil, fmt.Errorf("import image %q: %w", name, archiveErr(err))
	}
	return s.importOCI(ctx, name, img, want, "oci-layout")
}

// ImportDockerArchive imports the image of a `docker save` archive r
// (plain or gzip-compressed) as the image called name. The archive must
// hold exactly one image, for platform ("" is the host's).
func (s *Store) ImportDockerArchive(ctx context.Context, name string, r io.Reader, platform string) (*Image, error) {
	if err := checkImportName(name); err != nil {
		return nil, err
	}
	want, err := ParsePlatform(platform)
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(s.tmpDir(), "archive-*")
	if err != nil {
		return nil, fmt.Errorf("import image %q: %w", name, err)
	}
	defer os.RemoveAll(work)
	// The archive is read many times over (tarball looks each file up by
	// name), so it is kept, decompressed, in tmp/.
	spool := filepath.Join(work, "archive.tar")
	if err := s.spool(ctx, r, spool); err != nil {
		return nil, fmt.Errorf("import image %q: %w", name, err)
	}
	img, err := tarball.Image(func() (io.ReadCloser, error) { return os.Open(spool) }, nil)
	if err == nil {
		_, err = img.Manifest() // reads manifest.json and the config
	}
	if err != nil {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "import image %q: not a docker save archive of one image: %v", name, err)
	}
	return s.importOCI(ctx, name, img, want, "docker-archive")
}

// importOCI stores img, read from a local archive, as name.
func (s *Store) importOCI(ctx context.Context, name string, img v1.Image, want *v1.Platform, source string) (*Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "import image %q: %v", name, archiveErr(err))
	}
	if err := checkPlatform(cf, want, "the archive"); err != nil {
		return nil, fmt.Errorf("import image %q: %w", name, err)
	}
	cfg, err := configOf(cf)
	if err != nil {
		return nil, fmt.Errorf("import image %q: %w", name, err)
	}
	prov, err := provenanceOf(img, cf, source)
	if err != nil {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "import image %q: %v", name, archiveErr(err))
	}
	return s.storeOCI(ctx, name, img, cfg, prov, nil)
}

// archiveErr classifies what go-containerregistry says about a local
// archive: anything unclassified is the archive's fault.
func archiveErr(err error) error {
	if errdefs.ClassOf(err) != errdefs.ErrInternal || isResourceErr(err) {
		return err
	}
	return errdefs.New(errdefs.ErrInvalidArgument, "%v", err)
}

// spool copies r, decompressed if it is gzip, into the new file dst, within
// the import's byte limit.
func (s *Store) spool(ctx context.Context, r io.Reader, dst string) error {
	limit := s.maxImportBytes()
	br := bufio.NewReader(&ctxReader{ctx: ctx, r: r, limit: limit + 1})
	var in io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return errdefs.New(errdefs.ErrInvalidArgument, "malformed gzip stream: %w", err)
		}
		defer zr.Close()
		in = &ctxReader{ctx: ctx, r: zr, limit: limit + 1}
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(f, in)
	if err != nil {
		if errdefs.Is(err, errdefs.ErrTooLarge) || n > limit {
			return errdefs.New(errdefs.ErrTooLarge, "the archive exceeds %d bytes", limit)
		}
		if isResourceErr(err) {
			return err
		}
		return classifyReadErr(err)
	}
	return f.Close()
}
