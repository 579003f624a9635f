// Package client is the Go client of warren's REST API (v1), as documented
// in api/openapi.yaml. It is what the warren CLI uses to talk to the daemon,
// and it is usable on its own:
//
//	c := client.New("http://127.0.0.1:7433", client.WithToken(key))
//	s, err := c.CreateSession(ctx, &api.CreateSessionRequest{})
//	res, err := c.Exec(ctx, s.ID, &api.ExecRequest{Command: "echo hi"})
//
// Every method takes a context first and honours it. Errors that the daemon
// reports are *Error values, classified by Code; file and archive transfers
// are streamed in both directions and never held in memory whole.
//
// Output can be had live: ExecStream hands a command's output over as it is
// written; StartProcess starts a process that runs on its own, whose kept
// output ProcessOutput (events) and ReadProcessOutput (raw bytes) read from
// any offset; and Shell connects to an interactive terminal in a session
// over a WebSocket.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/warrenhq/warren/api"
)

// DefaultUserAgent is the User-Agent of requests unless WithUserAgent
// replaces it.
const DefaultUserAgent = "warren-go-client/v1"

// Client talks to one warren daemon. It is safe for concurrent use.
type Client struct {
	baseURL   string // without a trailing slash
	token     string
	userAgent string
	hc        *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithToken authenticates every request with "Authorization: Bearer token".
func WithToken(token string) Option {
	return func(c *Client) { c.token = token }
}

// WithHTTPClient makes the client send its requests through hc instead of
// http.DefaultClient. A timeout on hc also bounds streamed transfers. A nil
// hc is ignored.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.hc = hc
		}
	}
}

// WithUserAgent sets the User-Agent header of every request.
func WithUserAgent(ua string) Option {
	return func(c *Client) { c.userAgent = ua }
}

// New returns a client of the daemon at baseURL, such as
// "http://127.0.0.1:7433". A path in baseURL (a daemon behind a reverse
// proxy) is kept as a prefix of every request's path.
func New(baseURL string, opts ...Option) *Client {
	c := &Client{
		baseURL:   strings.TrimRight(baseURL, "/"),
		userAgent: DefaultUserAgent,
		hc:        http.DefaultClient,
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// sessionPath returns the escaped path of a session, plus suffix.
func sessionPath(id, suffix string) string {
	return "/v1/sessions/" + url.PathEscape(id) + suffix
}

// pathQuery returns the query that names a path inside a session.
func pathQuery(p string) url.Values {
	return url.Values{"path": {p}}
}

// request is one call to the daemon.
type request struct {
	method      string
	path        string // escaped
	query       url.Values
	body        io.Reader
	contentType string
	accept      string
}

// send performs r and returns the response when its status is 2xx; any other
// status is returned as an *Error, with the response closed.
func (c *Client) send(ctx context.Context, r *request) (*http.Response, error) {
	u := c.baseURL + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, r.body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	if r.body != nil && r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	if f, ok := r.body.(*os.File); ok {
		// A regular file has a known length: send it without chunking.
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			if off, err := f.Seek(0, io.SeekCurrent); err == nil {
				req.ContentLength = fi.Size() - off
			}
		}
	}
	if r.accept != "" {
		req.Header.Set("Accept", r.accept)
	}
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err // a *url.Error, which names the method and URL
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, errorFromResponse(resp)
	}
	return resp, nil
}

// doJSON performs a call whose request body (if in is not nil) and response
// body (if out is not nil) are JSON.
func (c *Client) doJSON(ctx context.Context, method, path string, query url.Values, in, out any) (*http.Response, error) {
	r := &request{method: method, path: path, query: query}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("%s %s: encode request: %w", method, path, err)
		}
		r.body, r.contentType = bytes.NewReader(b), "application/json"
	}
	if out != nil {
		r.accept = "application/json"
	}
	resp, err := c.send(ctx, r)
	if err != nil {
		return nil, err
	}
	defer closeBody(resp.Body)
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return nil, fmt.Errorf("%s %s: decode response: %w", method, path, err)
		}
	}
	return resp, nil
}

// closeBody drains a little of what is left of body, so that the connection
// can be reused, and closes it.
func closeBody(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 64<<10))
	body.Close()
}

// CreateSession creates a session. When req.ID names an existing session of
// the caller, that session is returned instead. A nil req creates a session
// with every default.
func (c *Client) CreateSession(ctx context.Context, req *api.CreateSessionRequest) (*api.Session, error) {
	if req == nil {
		req = &api.CreateSessionRequest{}
	}
	var s api.Session
	if _, err := c.doJSON(ctx, http.MethodPost, "/v1/sessions", nil, req, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// GetSession describes the session id.
func (c *Client) GetSession(ctx context.Context, id string) (*api.Session, error) {
	var s api.Session
	if _, err := c.doJSON(ctx, http.MethodGet, sessionPath(id, ""), nil, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ListSessions lists the caller's sessions.
func (c *Client) ListSessions(ctx context.Context) ([]api.Session, error) {
	var l api.SessionList
	if _, err := c.doJSON(ctx, http.MethodGet, "/v1/sessions", nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Sessions, nil
}

// DeleteSession deletes the session id and everything of it.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	_, err := c.doJSON(ctx, http.MethodDelete, sessionPath(id, ""), nil, nil, nil)
	return err
}

// Exec runs a command in the session id. A command that fails is not an
// error: its exit code is in the result.
func (c *Client) Exec(ctx context.Context, id string, req *api.ExecRequest) (*api.ExecResult, error) {
	var res api.ExecResult
	if _, err := c.doJSON(ctx, http.MethodPost, sessionPath(id, "/exec"), nil, req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Run runs one command in a fresh sandbox that is destroyed afterwards.
func (c *Client) Run(ctx context.Context, req *api.RunRequest) (*api.ExecResult, error) {
	var res api.ExecResult
	if _, err := c.doJSON(ctx, http.MethodPost, "/v1/run", nil, req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// ReadFile opens the file at path in the session id. The caller reads the
// file's bytes as they arrive and must close the reader.
func (c *Client) ReadFile(ctx context.Context, id, path string) (io.ReadCloser, error) {
	resp, err := c.send(ctx, &request{
		method: http.MethodGet, path: sessionPath(id, "/files"), query: pathQuery(path),
		accept: "application/octet-stream",
	})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// WriteFile writes what body yields to the file at path in the session id,
// creating missing parents. Mode sets the file's permission bits (including
// setuid, setgid and sticky); 0 leaves them to the daemon.
func (c *Client) WriteFile(ctx context.Context, id, path string, body io.Reader, mode os.FileMode) (*api.FileWritten, error) {
	q := pathQuery(path)
	if mode != 0 {
		q.Set("mode", FormatMode(mode))
	}
	return c.upload(ctx, http.MethodPut, sessionPath(id, "/files"), q, body, "application/octet-stream")
}

// FormatMode formats the permission bits of mode as four octal digits, such
// as "0755" or "4755", the form of the mode query parameter.
func FormatMode(mode os.FileMode) string {
	m := uint32(mode.Perm())
	if mode&os.ModeSetuid != 0 {
		m |= 0o4000
	}
	if mode&os.ModeSetgid != 0 {
		m |= 0o2000
	}
	if mode&os.ModeSticky != 0 {
		m |= 0o1000
	}
	return fmt.Sprintf("%04o", m)
}

// upload sends body as is and decodes a JSON answer.
func (c *Client) upload(ctx context.Context, method, path string, q url.Values, body io.Reader, contentType string) (*api.FileWritten, error) {
	if body == nil {
		body = http.NoBody
	}
	resp, err := c.send(ctx, &request{
		method: method, path: path, query: q, body: body,
		contentType: contentType, accept: "application/json",
	})
	if err != nil {
		return nil, err
	}
	defer closeBody(resp.Body)
	var w api.FileWritten
	if err := json.NewDecoder(resp.Body).Decode(&w); err != nil {
		return nil, fmt.Errorf("%s %s: decode response: %w", method, path, err)
	}
	return &w, nil
}

// ListFiles describes the entries of the directory at path in the session
// id.
func (c *Client) ListFiles(ctx context.Context, id, path string) ([]api.FileEntry, error) {
	var l api.FileList
	if _, err := c.doJSON(ctx, http.MethodGet, sessionPath(id, "/files/list"), pathQuery(path), nil, &l); err != nil {
		return nil, err
	}
	return l.Entries, nil
}

// StatFile describes the file, directory or symlink at path in the session
// id.
func (c *Client) StatFile(ctx context.Context, id, path string) (*api.FileEntry, error) {
	var e api.FileEntry
	if _, err := c.doJSON(ctx, http.MethodGet, sessionPath(id, "/files/stat"), pathQuery(path), nil, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// Mkdir creates the directory path and its missing parents in the session
// id (mkdir -p) and describes it.
func (c *Client) Mkdir(ctx context.Context, id, path string) (*api.FileEntry, error) {
	var e api.FileEntry
	if _, err := c.doJSON(ctx, http.MethodPost, sessionPath(id, "/files/mkdir"), pathQuery(path), nil, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// RemoveFile removes path in the session id; recursive removes a directory
// and everything below it.
func (c *Client) RemoveFile(ctx context.Context, id, path string, recursive bool) error {
	q := pathQuery(path)
	if recursive {
		q.Set("recursive", "true")
	}
	_, err := c.doJSON(ctx, http.MethodDelete, sessionPath(id, "/files"), q, nil, nil)
	return err
}

// DownloadArchive opens a tar of the directory at path in the session id,
// with entry names relative to it. The caller reads the tar as it arrives
// and must close the reader.
func (c *Client) DownloadArchive(ctx context.Context, id, path string) (io.ReadCloser, error) {
	resp, err := c.send(ctx, &request{
		method: http.MethodGet, path: sessionPath(id, "/archive"), query: pathQuery(path),
		accept: "application/x-tar",
	})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// UploadArchive extracts the tar that r yields into the directory path of
// the session id, streaming it.
func (c *Client) UploadArchive(ctx context.Context, id, path string, tar io.Reader) (*api.FileWritten, error) {
	return c.upload(ctx, http.MethodPut, sessionPath(id, "/archive"), pathQuery(path), tar, "application/x-tar")
}

// ListImages lists the stored images.
func (c *Client) ListImages(ctx context.Context) ([]api.Image, error) {
	var l api.ImageList
	if _, err := c.doJSON(ctx, http.MethodGet, "/v1/images", nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Images, nil
}

// ImportImage stores the root filesystem tar that r yields (plain or
// gzip-compressed) as the image name, streaming it.
func (c *Client) ImportImage(ctx context.Context, name string, tar io.Reader) (*api.Image, error) {
	if tar == nil {
		tar = http.NoBody
	}
	// Label the body by its first bytes: gzip starts with 1f 8b.
	ct := "application/x-tar"
	br := bufio.NewReader(tar)
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		ct = "application/gzip"
	}
	resp, err := c.send(ctx, &request{
		method: http.MethodPost, path: "/v1/images", query: url.Values{"name": {name}},
		body: br, contentType: ct, accept: "application/json",
	})
	if err != nil {
		return nil, err
	}
	defer closeBody(resp.Body)
	var img api.Image
	if err := json.NewDecoder(resp.Body).Decode(&img); err != nil {
		return nil, fmt.Errorf("POST /v1/images: decode response: %w", err)
	}
	return &img, nil
}

// Stats returns the daemon's statistics.
func (c *Client) Stats(ctx context.Context) (*api.Stats, error) {
	var s api.Stats
	if _, err := c.doJSON(ctx, http.MethodGet, "/v1/stats", nil, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Health reports whether the daemon is alive (GET /healthz).
func (c *Client) Health(ctx context.Context) error {
	_, err := c.doJSON(ctx, http.MethodGet, "/healthz", nil, nil, nil)
	return err
}

// RenewSession refreshes the idle TTL of the session id and describes it
// again, with its new ExpiresAt. There is no REST verb for it: every call
// that uses a session renews it (describing it does not), and a stat of
// "/" is the cheapest such call. The Python and TypeScript SDKs' renew do
// the same (docs/SDK.md).
func (c *Client) RenewSession(ctx context.Context, id string) (*api.Session, error) {
	if _, err := c.StatFile(ctx, id, "/"); err != nil {
		return nil, err
	}
	return c.GetSession(ctx, id)
}
