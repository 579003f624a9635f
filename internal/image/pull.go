package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/warrenhq/warren/internal/errdefs"
)

// PullOptions configure Pull.
type PullOptions struct {
	// Name is the local name; "" derives it from the reference (see
	// DefaultName).
	Name string
	// Platform is "os/arch[/variant]"; "" is the host's.
	Platform string
	// Keychain finds registry credentials; nil is authn.DefaultKeychain,
	// the daemon's Docker config ($DOCKER_CONFIG/config.json or
	// ~/.docker/config.json, with its credential helpers).
	Keychain authn.Keychain
	// Transport, if set, carries the registry requests.
	Transport http.RoundTripper
	// Progress, if set, hears how the pull goes. Calls never overlap.
	Progress func(Progress)
	// Jobs is how many layers download at once (default 3).
	Jobs int
}

// Progress is one step of a pull.
type Progress struct {
	// Status is one of:
	//   - "resolving": the manifest and config are fetched;
	//   - "waiting", "downloading", "downloaded": a layer (Layer, Digest),
	//     with Current of Total bytes (compressed);
	//   - "exists": the content was stored already; nothing is downloaded;
	//   - "extracting": the layers are flattened into the rootfs;
	//   - "storing": the rootfs is digested and stored.
	Status string
	// Layer is the layer's index, from 1 (the bottom layer) to Layers; 0
	// for a step of the whole image.
	Layer, Layers int
	// Digest is the layer's digest.
	Digest         string
	Current, Total int64
}

// DefaultName is the local name of a pulled reference: the last component
// of its repository, with ":tag" unless the tag is "latest" (or the
// reference names a digest). "python:3.12-slim" is "python:3.12-slim",
// "ghcr.io/org/tool" is "tool".
func DefaultName(ref name.Reference) string {
	repo := ref.Context().RepositoryStr()
	n := repo[strings.LastIndexByte(repo, '/')+1:]
	if t, ok := ref.(name.Tag); ok && t.TagStr() != "latest" && t.TagStr() != "" {
		n += ":" + t.TagStr()
	}
	return n
}

// ParseReference parses an image reference as Docker does: "python" is
// index.docker.io/library/python:latest.
func ParseReference(ref string) (name.Reference, error) {
	if ref == "" || len(ref) > 1024 || strings.ContainsAny(ref, " \t\n\x00") {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "invalid image reference %.64q", ref)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "invalid image reference %q: %v", ref, err)
	}
	return r, nil
}

// Pull downloads the image ref from its registry and stores it, flattened,
// under opts.Name. Layers are downloaded into tmp/, checked against their
// digests and sizes, then flattened as ImportOCILayout does; a pull of
// content that is stored already only points the name at it.
//
// Errors are classified: a bad reference or platform is
// ErrInvalidArgument; an image the registry does not have (or will not show
// without credentials) ErrNotFound; a registry that cannot be reached or
// fails ErrUnavailable; its rate limit ErrResourceExhausted.
func (s *Store) Pull(ctx context.Context, ref string, opts PullOptions) (*Image, error) {
	r, err := ParseReference(ref)
	if err != nil {
		return nil, err
	}
	local := opts.Name
	if local == "" {
		local = DefaultName(r)
	}
	if err := checkImportName(local); err != nil {
		return nil, err
	}
	want, err := ParsePlatform(opts.Platform)
	if err != nil {
		return nil, err
	}
	report := func(Progress) {}
	if opts.Progress != nil {
		var mu sync.Mutex
		report = func(p Progress) {
			mu.Lock()
			defer mu.Unlock()
			opts.Progress(p)
		}
	}
	kc := opts.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc), remote.WithPlatform(*want)}
	if opts.Transport != nil {
		ropts = append(ropts, remote.WithTransport(opts.Transport))
	}

	report(Progress{Status: "resolving"})
	desc, err := remote.Get(r, ropts...)
	if err != nil {
		return nil, registryErr(r, err)
	}
	var img v1.Image
	switch {
	case desc.MediaType.IsIndex():
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, registryErr(r, err)
		}
		if img, err = pickImage(idx, want, r.String()); err != nil {
			return nil, registryErr(r, err)
		}
	case desc.MediaType.IsSchema1():
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "%s is a Docker schema 1 image, which is not supported", r)
	default:
		if img, err = desc.Image(); err != nil {
			return nil, registryErr(r, err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, registryErr(r, err)
	}
	if err := checkPlatform(cf, want, r.String()); err != nil {
		return nil, err
	}
	cfg, err := configOf(cf)
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", r, err)
	}
	mf, err := img.Manifest()
	if err != nil {
		return nil, registryErr(r, err)
	}
	prov, err := provenanceOf(img, cf, r.Name())
	if err != nil {
		return nil, registryErr(r, err)
	}
	if d, err := img.Digest(); err == nil {
		prov.RepoDigest = r.Context().Name() + "@" + d.String()
	}
	if d := s.stored(prov.ImageID, cfg); d != "" {
		if stored, err := s.point(local, d); err == nil {
			report(Progress{Status: "exists", Layers: len(mf.Layers)})
			return stored, nil
		}
	}

	work, err := os.MkdirTemp(s.tmpDir(), "pull-*")
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", r, err)
	}
	defer os.RemoveAll(work)
	layers, err := s.download(ctx, r, img, mf, cf, work, opts.Jobs, report)
	if err != nil {
		return nil, err
	}
	flat, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", r, err)
	}
	report(Progress{Status: "extracting", Layers: len(layers)})
	return s.storeOCI(ctx, local, flat, cfg, prov, func() {
		report(Progress{Status: "storing", Layers: len(layers)})
	})
}

// download fetches img's layers into dir, jobs at a time, and returns
// them as layers read from there.
func (s *Store) download(ctx context.Context, r name.Reference, img v1.Image, mf *v1.Manifest, cf *v1.ConfigFile, dir string, jobs int, report func(Progress)) ([]v1.Layer, error) {
	n := len(mf.Layers)
	if len(cf.RootFS.DiffIDs) != n {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "%s: the manifest has %d layers, the config %d", r, n, len(cf.RootFS.DiffIDs))
	}
	var total int64
	for _, d := range mf.Layers {
		if d.Size < 0 || d.Digest.Algorithm != "sha256" || len(d.Digest.Hex) != 64 {
			return nil, errdefs.New(errdefs.ErrInvalidArgument, "%s: bad layer descriptor %s", r, d.Digest)
		}
		if !d.MediaType.IsDistributable() {
			return nil, errdefs.New(errdefs.ErrInvalidArgument, "%s: layer %s is a foreign layer (%s), which warren does not fetch", r, d.Digest, d.MediaType)
		}
		total += d.Size
	}
	if limit := s.maxImportBytes(); total > limit {
		return nil, errdefs.New(errdefs.ErrTooLarge, "%s: its layers are %d bytes, over the import limit of %d", r, total, limit)
	}
	for i, d := range mf.Layers {
		report(Progress{Status: "waiting", Layer: i + 1, Layers: n, Digest: d.Digest.String(), Total: d.Size})
	}
	if jobs <= 0 {
		jobs = 3
	}
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	layers := make([]v1.Layer, n)
	errs := make([]error, n)
	sem := make(chan struct{}, jobs)
	var wg sync.WaitGroup
	for i, d := range mf.Layers {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-dctx.Done():
				errs[i] = dctx.Err()
				return
			}
			defer func() { <-sem }()
			p := filepath.Join(dir, "layer-"+strconv.Itoa(i))
			if err := fetchLayer(dctx, img, d, p, func(cur int64, done bool) {
				st := "downloading"
				if done {
					st = "downloaded"
				}
				report(Progress{Status: st, Layer: i + 1, Layers: n, Digest: d.Digest.String(), Current: cur, Total: d.Size})
			}); err != nil {
				errs[i] = registryErr(r, err)
				cancel()
				return
			}
			layers[i], errs[i] = partial.CompressedToLayer(&fileLayer{path: p, desc: d, diffID: cf.RootFS.DiffIDs[i]})
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The first real error, not the cancellations it caused.
	var first error
	for _, err := range errs {
		if err != nil && (first == nil || errors.Is(first, context.Canceled) && !errors.Is(err, context.Canceled)) {
			first = err
		}
	}
	if first != nil {
		return nil, first
	}
	return layers, nil
}

// progressEvery is how often a layer's download reports its progress.
const progressEvery = 100 * time.Millisecond

// fetchLayer downloads the layer d of img into the new file p, checking
// its size and SHA-256 digest.
func fetchLayer(ctx context.Context, img v1.Image, d v1.Descriptor, p string, progress func(cur int64, done bool)) error {
	l, err := img.LayerByDigest(d.Digest)
	if err != nil {
		return err
	}
	rc, err := l.Compressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	var cur int64
	last := time.Now()
	buf := make([]byte, 256<<10)
	in := io.LimitReader(rc, d.Size+1)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, rerr := in.Read(buf)
		if n > 0 {
			if _, err := f.Write(buf[:n]); err != nil {
				return err
			}
			h.Write(buf[:n])
			cur += int64(n)
			if time.Since(last) >= progressEvery {
				last = time.Now()
				progress(cur, false)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	if cur != d.Size {
		return errdefs.New(errdefs.ErrInvalidArgument, "layer %s: got %d bytes, the manifest says %d", d.Digest, cur, d.Size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != d.Digest.Hex {
		return errdefs.New(errdefs.ErrInvalidArgument, "layer %s: the content's digest is sha256:%s", d.Digest, got)
	}
	if err := f.Close(); err != nil {
		return err
	}
	progress(cur, true)
	return nil
}

// fileLayer is a downloaded layer: compressed (or not) as the registry
// served it, in a file of the pull's work directory.
type fileLayer struct {
	path   string
	desc   v1.Descriptor
	diffID v1.Hash
}

func (l *fileLayer) Digest() (v1.Hash, error)            { return l.desc.Digest, nil }
func (l *fileLayer) DiffID() (v1.Hash, error)            { return l.diffID, nil }
func (l *fileLayer) Size() (int64, error)                { return l.desc.Size, nil }
func (l *fileLayer) MediaType() (types.MediaType, error) { return l.desc.MediaType, nil }
func (l *fileLayer) Compressed() (io.ReadCloser, error)  { return os.Open(l.path) }

var _ partial.CompressedLayer = (*fileLayer)(nil)

// registryErr classifies an error of talking to the registry of r.
func registryErr(r name.Reference, err error) error {
	if errdefs.ClassOf(err) != errdefs.ErrInternal || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var te *transport.Error
	if errors.As(err, &te) {
		for _, d := range te.Errors {
			switch d.Code {
			case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode, transport.BlobUnknownErrorCode:
				return errdefs.New(errdefs.ErrNotFound, "%s: not found in the registry (%v)", r, err)
			case transport.DeniedErrorCode, transport.UnauthorizedErrorCode:
				return errdefs.New(errdefs.ErrNotFound, "%s: the registry denies access: the repository does not exist or needs credentials, which the daemon takes from its Docker config (%v)", r, err)
			case transport.TooManyRequestsErrorCode:
				return errdefs.New(errdefs.ErrResourceExhausted, "%s: the registry's rate limit: %v", r, err)
			}
		}
		switch {
		case te.StatusCode == http.StatusNotFound:
			return errdefs.New(errdefs.ErrNotFound, "%s: not found in the registry (%v)", r, err)
		case te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden:
			return errdefs.New(errdefs.ErrNotFound, "%s: the registry denies access: the repository does not exist or needs credentials, which the daemon takes from its Docker config (%v)", r, err)
		case te.StatusCode == http.StatusTooManyRequests:
			return errdefs.New(errdefs.ErrResourceExhausted, "%s: the registry's rate limit: %v", r, err)
		default:
			return errdefs.New(errdefs.ErrUnavailable, "%s: the registry failed: %v", r, err)
		}
	}
	var ue *url.Error
	var ne net.Error
	if errors.As(err, &ue) || errors.As(err, &ne) {
		return errdefs.New(errdefs.ErrUnavailable, "%s: cannot reach the registry %s: %v", r, r.Context().RegistryStr(), err)
	}
	if isResourceErr(err) {
		return fmt.Errorf("pull %s: %w", r, err)
	}
	// What is left is the registry's answer making no sense: malformed
	// manifests and configs.
	return errdefs.New(errdefs.ErrInvalidArgument, "%s: %v", r, err)
}
