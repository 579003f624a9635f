package envd

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strings"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// writeError answers in envd's REST error shape.
func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{status, msg})
}

// restStatus maps warren's error classes (and envd's Connect codes)
// to envd's REST statuses.
func (s *Server) restErr(w http.ResponseWriter, r *http.Request, t Target, err error) {
	status := http.StatusInternalServerError
	var ce *connect.Error
	if errors.As(err, &ce) {
		switch ce.Code() {
		case connect.CodeNotFound:
			status = http.StatusNotFound
		case connect.CodeInvalidArgument, connect.CodeAlreadyExists, connect.CodeFailedPrecondition:
			status = http.StatusBadRequest
		case connect.CodeUnauthenticated, connect.CodePermissionDenied:
			status = http.StatusUnauthorized
		case connect.CodeResourceExhausted:
			status = http.StatusInsufficientStorage
		case connect.CodeUnavailable:
			status = http.StatusBadGateway
		}
		writeError(w, status, ce.Message())
		return
	}
	switch errdefs.ClassOf(err) {
	case errdefs.ErrNotFound:
		status = http.StatusNotFound
		if s.gone(r.Context(), t) {
			status = http.StatusBadGateway
		}
	case errdefs.ErrInvalidArgument, errdefs.ErrConflict:
		status = http.StatusBadRequest
	case errdefs.ErrUnauthenticated, errdefs.ErrPermissionDenied:
		status = http.StatusUnauthorized
	case errdefs.ErrTooLarge:
		status = http.StatusRequestEntityTooLarge
	case errdefs.ErrResourceExhausted:
		status = http.StatusInsufficientStorage
	case errdefs.ErrUnavailable:
		status = http.StatusBadGateway
	}
	writeError(w, status, err.Error())
}

// fileRequest reads what GET and POST /files share: the target, the user
// (the username parameter, else the Authorization header) and a resolver of
// paths relative to the user's home.
func (s *Server) fileRequest(r *http.Request) (Target, string, error) {
	t, _ := TargetFrom(r.Context())
	if u := r.URL.Query().Get("username"); u != "" {
		if err := checkUserName(u); err != nil {
			return t, "", err
		}
		return t, u, nil
	}
	user, err := userOf(t, r.Header)
	return t, user, err
}

// resolve makes p absolute: relative paths resolve in user's home.
func (s *Server) resolve(r *http.Request, t Target, user, p string) (string, error) {
	if p == "" {
		return "", errdefs.New(errdefs.ErrInvalidArgument, "path is required")
	}
	if strings.HasPrefix(p, "~/") || p == "~" {
		p = strings.TrimPrefix(strings.TrimPrefix(p, "~"), "/")
	}
	if !path.IsAbs(p) {
		home, err := s.home(r.Context(), t, user)
		if err != nil {
			return "", err
		}
		p = path.Join(home, p)
	}
	return path.Clean(p), nil
}

// download serves GET /files: the file's bytes, gzip-compressed when the
// client accepts it.
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	t, user, err := s.fileRequest(r)
	if err != nil {
		s.restErr(w, r, t, err)
		return
	}
	p, err := s.resolve(r, t, user, r.URL.Query().Get("path"))
	if err != nil {
		s.restErr(w, r, t, err)
		return
	}
	if user != defaultUser(t) && user != "root" {
		// The agent reads as root; a user other than the sandbox's must
		// be able to read the file itself.
		if _, err := s.fs(r.Context(), t, user, &session.FSRequest{Op: session.FSReadable, Path: p}); err != nil {
			s.restErr(w, r, t, err)
			return
		}
	}
	d, err := s.mgr.ReadFile(r.Context(), t.Tenant, t.Session, p)
	if err != nil {
		if errdefs.Is(err, errdefs.ErrNotFound) && !s.gone(r.Context(), t) {
			writeError(w, http.StatusNotFound, fmt.Sprintf("path '%s' does not exist", p))
			return
		}
		s.restErr(w, r, t, err)
		return
	}
	defer d.Close()
	src := io.MultiReader(strings.NewReader(string(d.First)), d)
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)}))
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		h.Set("Content-Encoding", "gzip")
		h.Add("Vary", "Accept-Encoding")
		zw := gzip.NewWriter(w)
		if _, err := io.Copy(zw, src); err == nil {
			err = d.Err()
			if err == nil {
				zw.Close()
			}
		}
		return
	}
	// A small file goes out with its length (the SDK reads an empty file
	// by a Content-Length of 0); a large one streams.
	br := bufio.NewReaderSize(src, 64<<10)
	if head, err := br.Peek(64 << 10); errors.Is(err, io.EOF) {
		if d.Err() == nil {
			h.Set("Content-Length", fmt.Sprint(len(head)))
		}
	}
	_, _ = io.Copy(w, br) // a failed read cuts the response short; the client sees a short body
}

// acceptsGzip says whether an Accept-Encoding admits gzip.
func acceptsGzip(ae string) bool {
	for _, part := range strings.Split(ae, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") && strings.ReplaceAll(strings.TrimSpace(params), " ", "") != "q=0" {
			return true
		}
	}
	return false
}

// uploadEntry is one written file, as POST /files answers it.
type uploadEntry struct {
	Name     string            `json:"name"`
	Type     string            `json:"type"`
	Path     string            `json:"path"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// The limits of file metadata, as E2B's envd sets them: a key fits a Linux
// xattr name after the user.e2b. prefix, and all of a file's metadata fits
// an inode's xattr space.
const (
	maxMetadataKey   = 246
	maxMetadataTotal = 4096
	xattrPrefix      = "user.e2b."
)

// uploadMetadata reads the X-Metadata-* headers: the first value of each,
// key lowercased.
func uploadMetadata(h http.Header) (map[string]string, error) {
	md := map[string]string{}
	total := 0
	for k, vs := range h {
		key, ok := cutPrefixFold(k, "X-Metadata-")
		if !ok || len(vs) == 0 {
			continue
		}
		key = strings.ToLower(key)
		v := vs[0]
		if key == "" || len(key) > maxMetadataKey || !printable(key) || !printable(v) {
			return nil, errdefs.New(errdefs.ErrInvalidArgument, "invalid metadata key %q: keys (at most %d bytes) and values must be printable US-ASCII", key, maxMetadataKey)
		}
		md[key] = v
		total += len(xattrPrefix) + len(key) + len(v)
	}
	if total > maxMetadataTotal {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "metadata is %d bytes; at most %d are allowed", total, maxMetadataTotal)
	}
	return md, nil
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return "", false
	}
	return s[len(prefix):], true
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// upload serves POST /files: multipart (one or more files, each part's
// filename its path) or a raw octet-stream body for the path parameter,
// either gzip-compressed by Content-Encoding. Parents are created; an
// existing file is replaced, with the metadata of this request only.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	t, user, err := s.fileRequest(r)
	if err != nil {
		s.restErr(w, r, t, err)
		return
	}
	md, err := uploadMetadata(r.Header)
	if err != nil {
		s.restErr(w, r, t, err)
		return
	}
	body := io.Reader(r.Body)
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			writeError(w, http.StatusBadRequest, "the body is not gzip: "+err.Error())
			return
		}
		defer zr.Close()
		body = zr
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("unsupported Content-Encoding %q, supported: [identity, gzip]", enc))
		return
	}
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var written []uploadEntry
	write := func(p string, src io.Reader) error {
		abs, err := s.resolve(r, t, user, p)
		if err != nil {
			return err
		}
		if _, err := s.mgr.WriteFile(r.Context(), t.Tenant, t.Session, abs, 0, src); err != nil {
			return err
		}
		e := uploadEntry{Name: path.Base(abs), Type: "file", Path: abs}
		// The agent wrote the file as the sandbox's user, on a new inode
		// (so an overwrite drops the old metadata); metadata and another
		// owner take one more agent call. A session that cannot switch
		// users leaves the file its own user's, root's writes included.
		own := user != defaultUser(t) && canSwitch(t, user)
		if len(md) > 0 || own {
			rep, err := s.fs(r.Context(), t, user, &session.FSRequest{Op: session.FSMetadata, Path: abs, Metadata: md, Own: own})
			if err != nil {
				return err
			}
			e.Metadata = rep.Entry.Metadata
		}
		written = append(written, e)
		return nil
	}
	switch {
	case ct == "multipart/form-data":
		mr := multipart.NewReader(body, params["boundary"])
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				writeError(w, http.StatusBadRequest, "reading the multipart body: "+err.Error())
				return
			}
			if part.FormName() != "file" {
				part.Close()
				continue
			}
			// The part's filename is the file's path; Part.FileName keeps
			// only its base, so read the header itself.
			_, dp, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
			p := dp["filename"]
			if q := r.URL.Query().Get("path"); q != "" && len(written) == 0 && (p == "" || p == "blob") {
				p = q
			}
			err = write(p, part)
			part.Close()
			if err != nil {
				s.restErr(w, r, t, err)
				return
			}
		}
		if len(written) == 0 {
			writeError(w, http.StatusBadRequest, "the multipart body has no part named file")
			return
		}
	case ct == "application/octet-stream" || ct == "":
		if err := write(r.URL.Query().Get("path"), body); err != nil {
			s.restErr(w, r, t, err)
			return
		}
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("unsupported Content-Type %q: send multipart/form-data or application/octet-stream", ct))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(written)
}
