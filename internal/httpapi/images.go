package httpapi

import (
	"context"
	"io"
	"net/http"
	"strings"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/edge"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/image"
)

// Images is what the API needs of the image store.
type Images interface {
	List() ([]*image.Image, error)
	Get(name string) (*image.Image, error)
	Remove(name string) error
	Prune() (*image.PruneResult, error)
	ImportTar(ctx context.Context, name string, r io.Reader) (*image.Image, error)
	ImportOCILayout(ctx context.Context, name string, r io.Reader, platform string) (*image.Image, error)
	ImportDockerArchive(ctx context.Context, name string, r io.Reader, platform string) (*image.Image, error)
	Pull(ctx context.Context, ref string, opts image.PullOptions) (*image.Image, error)
}

// Images are shared by every tenant: reading them is open to every caller,
// changing them (import, pull, removal, prune) needs an admin.

func toAPIImage(im *image.Image) api.Image {
	return api.Image{
		Name: im.Name, Digest: im.Digest, Size: im.Size, CreatedAt: im.CreatedAt,
		Source: im.Source, RepoDigest: im.RepoDigest, ImageID: im.ImageID, Platform: im.Platform, Layers: im.Layers,
		Env: im.Env, WorkingDir: im.WorkingDir, User: im.User, Entrypoint: im.Entrypoint, Cmd: im.Cmd,
	}
}

func (s *Server) listImages(w http.ResponseWriter, r *http.Request) {
	ims, err := s.cfg.Images.List()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.ImageList{Images: make([]api.Image, 0, len(ims))}
	for _, im := range ims {
		out.Images = append(out.Images, toAPIImage(im))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getImage(w http.ResponseWriter, r *http.Request) {
	im, err := s.cfg.Images.Get(r.PathValue("name"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toAPIImage(im))
}

// maxUsersNamed bounds the sessions a conflict names.
const maxUsersNamed = 10

// deleteImage removes an image's name, unless sessions use it. Its content
// goes with the next prune, once no session runs from it and no snapshot
// applies to it.
func (s *Server) deleteImage(w http.ResponseWriter, r *http.Request) {
	if err := requireAdmin(r, "removing images"); err != nil {
		s.writeError(w, r, err)
		return
	}
	name := r.PathValue("name")
	if err := image.ValidName(name); err != nil {
		s.writeError(w, r, err)
		return
	}
	if users := s.m.ImageUsers(name); len(users) > 0 {
		named := users
		more := ""
		if len(named) > maxUsersNamed {
			named, more = named[:maxUsersNamed], " and more"
		}
		s.writeError(w, r, errdefs.New(errdefs.ErrConflict, "image %q is in use by %d session(s): %s%s; delete them first",
			name, len(users), strings.Join(named, ", "), more))
		return
	}
	if err := s.cfg.Images.Remove(name); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) pruneImages(w http.ResponseWriter, r *http.Request) {
	if err := requireAdmin(r, "pruning images"); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.cfg.Images.Prune()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.ImagePruneResult{Deleted: res.Deleted, ReclaimedBytes: res.Bytes}
	if out.Deleted == nil {
		out.Deleted = []string{}
	}
	writeJSON(w, http.StatusOK, out)
}

// importImage stores the body as the image ?name=: a rootfs tar (the
// default), an OCI image layout as a tar (?format=oci-layout) or a `docker
// save` archive (?format=docker-archive), plain or gzip-compressed.
func (s *Server) importImage(w http.ResponseWriter, r *http.Request) {
	if err := requireAdmin(r, "importing images"); err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	name := q.Get("name")
	if name == "" {
		s.writeError(w, r, errdefs.New(errdefs.ErrInvalidArgument, "query parameter name is required"))
		return
	}
	platform := q.Get("platform")
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxImageBytes)
	var im *image.Image
	var err error
	switch f := q.Get("format"); f {
	case "", "rootfs":
		if platform != "" {
			err = badQuery("platform", platform, "applies to formats oci-layout and docker-archive only")
			break
		}
		im, err = s.cfg.Images.ImportTar(r.Context(), name, body)
	case "oci-layout":
		im, err = s.cfg.Images.ImportOCILayout(r.Context(), name, body, platform)
	case "docker-archive":
		im, err = s.cfg.Images.ImportDockerArchive(r.Context(), name, body, platform)
	default:
		err = badQuery("format", f, "must be rootfs, oci-layout or docker-archive")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, toAPIImage(im))
}

// pullImage pulls an image from its registry. With Accept:
// text/event-stream it answers with server-sent events: "progress"
// (PullProgress) as the pull goes, then "image" (Image) or "error".
func (s *Server) pullImage(w http.ResponseWriter, r *http.Request) {
	if err := requireAdmin(r, "pulling images"); err != nil {
		s.writeError(w, r, err)
		return
	}
	var req api.PullImageRequest
	if err := decodeJSON(r, &req, s.cfg.MaxJSONBytes, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Ref == "" {
		s.writeError(w, r, errdefs.New(errdefs.ErrInvalidArgument, "ref is required"))
		return
	}
	opts := image.PullOptions{Name: req.Name, Platform: req.Platform}
	if !wantsSSE(r) {
		im, err := s.cfg.Images.Pull(r.Context(), req.Ref, opts)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, toAPIImage(im))
		return
	}
	e := newSSE(w)
	var sendErr error
	opts.Progress = func(p image.Progress) {
		if sendErr != nil {
			return // the client is gone; the pull ends with its context
		}
		sendErr = e.event("progress", "", api.PullProgress{
			Status: p.Status, Layer: p.Layer, Layers: p.Layers, Digest: p.Digest, Current: p.Current, Total: p.Total,
		})
	}
	im, err := s.cfg.Images.Pull(r.Context(), req.Ref, opts)
	if err != nil {
		if !e.started {
			s.writeError(w, r, err)
			return
		}
		edge.Failed(r.Context(), err)
		e.event("error", "", api.Error{Error: api.ErrorBody{Code: errdefs.ClassOf(err).String(), Message: err.Error()}})
		return
	}
	e.event("image", "", toAPIImage(im))
}
