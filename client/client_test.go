package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/warrenhq/warren/api"
)

// seen is what the fake daemon received.
type seen struct {
	method, path, contentType, accept, auth, userAgent string
	query                                              url.Values
	body                                               []byte
}

// fakeDaemon answers every request with status, header and body, and records
// the request.
func fakeDaemon(t *testing.T, status int, header http.Header, body string) (*httptest.Server, *seen) {
	t.Helper()
	got := &seen{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read request body: %v", err)
		}
		*got = seen{
			method: r.Method, path: r.URL.EscapedPath(), query: r.URL.Query(),
			contentType: r.Header.Get("Content-Type"), accept: r.Header.Get("Accept"),
			auth: r.Header.Get("Authorization"), userAgent: r.Header.Get("User-Agent"),
			body: b,
		}
		for k, v := range header {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

var (
	t0      = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	session = api.Session{
		ID: "demo", Image: "default", State: "running", CreatedAt: t0, LastUsedAt: t0,
		ExpiresAt: t0.Add(time.Hour), Cwd: "/workspace", Limits: api.Limits{MemoryMB: 512}, Network: "none",
	}
	entry = api.FileEntry{Name: "a.txt", Path: "/workspace/a.txt", Type: "file", Size: 3, Mode: "0644", MTime: t0}
)

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readAllClose(rc io.ReadCloser, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}

func TestCalls(t *testing.T) {
	stdin := "input"
	tests := []struct {
		name       string
		call       func(context.Context, *Client) (any, error)
		wantMethod string
		wantPath   string // escaped
		wantQuery  url.Values
		wantCT     string // request Content-Type
		wantBody   string // JSON bodies are compared as JSON
		status     int
		respBody   string
		want       any
	}{
		{
			name: "CreateSession",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateSession(ctx, &api.CreateSessionRequest{
					ID: "demo", Image: "py", Env: map[string]string{"A": "1"},
					Limits: &api.Limits{MemoryMB: 512, CPUs: 1.5}, TTLSeconds: 600,
				})
			},
			wantMethod: "POST", wantPath: "/v1/sessions", wantCT: "application/json",
			wantBody: `{"id":"demo","image":"py","env":{"A":"1"},"limits":{"memory_mb":512,"cpus":1.5},"ttl_seconds":600}`,
			status:   201, respBody: mustJSON(t, session), want: &session,
		},
		{
			name: "CreateSession existing (200)",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateSession(ctx, nil)
			},
			wantMethod: "POST", wantPath: "/v1/sessions", wantCT: "application/json", wantBody: `{}`,
			status: 200, respBody: mustJSON(t, session), want: &session,
		},
		{
			name:       "GetSession escapes the id",
			call:       func(ctx context.Context, c *Client) (any, error) { return c.GetSession(ctx, "a/b c?") },
			wantMethod: "GET", wantPath: "/v1/sessions/a%2Fb%20c%3F",
			status: 200, respBody: mustJSON(t, session), want: &session,
		},
		{
			name:       "ListSessions",
			call:       func(ctx context.Context, c *Client) (any, error) { return c.ListSessions(ctx) },
			wantMethod: "GET", wantPath: "/v1/sessions",
			status: 200, respBody: mustJSON(t, api.SessionList{Sessions: []api.Session{session}}),
			want: []api.Session{session},
		},
		{
			name: "DeleteSession",
			call: func(ctx context.Context, c *Client) (any, error) {
				return nil, c.DeleteSession(ctx, "demo")
			},
			wantMethod: "DELETE", wantPath: "/v1/sessions/demo", status: 204,
		},
		{
			name: "Exec",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.Exec(ctx, "demo", &api.ExecRequest{Command: "cat; exit 3", Stdin: &stdin, TimeoutMs: 5000})
			},
			wantMethod: "POST", wantPath: "/v1/sessions/demo/exec", wantCT: "application/json",
			wantBody: `{"command":"cat; exit 3","stdin":"input","timeout_ms":5000}`,
			status:   200, respBody: `{"stdout":"input","stderr":"","exit_code":3,"duration_ms":1.5,"timed_out":false,"truncated":false,"shell_restarted":true,"oom_killed":false}`,
			want: &api.ExecResult{Stdout: "input", ExitCode: 3, DurationMs: 1.5, ShellRestarted: true},
		},
		{
			name: "Run",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.Run(ctx, &api.RunRequest{
					Image: "py", Limits: &api.Limits{Pids: 64},
					ExecRequest: api.ExecRequest{Argv: []string{"python3", "-V"}},
				})
			},
			wantMethod: "POST", wantPath: "/v1/run", wantCT: "application/json",
			wantBody: `{"image":"py","limits":{"pids":64},"argv":["python3","-V"]}`,
			status:   200, respBody: `{"stdout":"Python 3.12\n","stderr":"","exit_code":0,"duration_ms":9,"timed_out":false,"truncated":false,"shell_restarted":false,"oom_killed":false}`,
			want: &api.ExecResult{Stdout: "Python 3.12\n", DurationMs: 9},
		},
		{
			name: "ReadFile",
			call: func(ctx context.Context, c *Client) (any, error) {
				return readAllClose(c.ReadFile(ctx, "demo", "dir/a b&c.txt"))
			},
			wantMethod: "GET", wantPath: "/v1/sessions/demo/files", wantQuery: url.Values{"path": {"dir/a b&c.txt"}},
			status: 200, respBody: "\x00\x01binary", want: "\x00\x01binary",
		},
		{
			name: "WriteFile with mode",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.WriteFile(ctx, "demo", "/workspace/run.sh", strings.NewReader("#!/bin/sh\n"), 0o755)
			},
			wantMethod: "PUT", wantPath: "/v1/sessions/demo/files",
			wantQuery: url.Values{"path": {"/workspace/run.sh"}, "mode": {"0755"}},
			wantCT:    "application/octet-stream", wantBody: "#!/bin/sh\n",
			status: 200, respBody: `{"path":"/workspace/run.sh","size":10}`,
			want: &api.FileWritten{Path: "/workspace/run.sh", Size: 10},
		},
		{
			name: "WriteFile without mode",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.WriteFile(ctx, "demo", "a.txt", strings.NewReader("abc"), 0)
			},
			wantMethod: "PUT", wantPath: "/v1/sessions/demo/files", wantQuery: url.Values{"path": {"a.txt"}},
			wantCT: "application/octet-stream", wantBody: "abc",
			status: 200, respBody: `{"path":"/workspace/a.txt","size":3}`,
			want: &api.FileWritten{Path: "/workspace/a.txt", Size: 3},
		},
		{
			name: "ListFiles",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.ListFiles(ctx, "demo", ".")
			},
			wantMethod: "GET", wantPath: "/v1/sessions/demo/files/list", wantQuery: url.Values{"path": {"."}},
			status: 200, respBody: mustJSON(t, api.FileList{Entries: []api.FileEntry{entry}}),
			want: []api.FileEntry{entry},
		},
		{
			name: "StatFile",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.StatFile(ctx, "demo", "a.txt")
			},
			wantMethod: "GET", wantPath: "/v1/sessions/demo/files/stat", wantQuery: url.Values{"path": {"a.txt"}},
			status: 200, respBody: mustJSON(t, entry), want: &entry,
		},
		{
			name: "Mkdir",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.Mkdir(ctx, "demo", "a/b")
			},
			wantMethod: "POST", wantPath: "/v1/sessions/demo/files/mkdir", wantQuery: url.Values{"path": {"a/b"}},
			status: 200, respBody: mustJSON(t, entry), want: &entry,
		},
		{
			name: "RemoveFile recursive",
			call: func(ctx context.Context, c *Client) (any, error) {
				return nil, c.RemoveFile(ctx, "demo", "a", true)
			},
			wantMethod: "DELETE", wantPath: "/v1/sessions/demo/files",
			wantQuery: url.Values{"path": {"a"}, "recursive": {"true"}}, status: 204,
		},
		{
			name: "RemoveFile",
			call: func(ctx context.Context, c *Client) (any, error) {
				return nil, c.RemoveFile(ctx, "demo", "a", false)
			},
			wantMethod: "DELETE", wantPath: "/v1/sessions/demo/files", wantQuery: url.Values{"path": {"a"}}, status: 204,
		},
		{
			name: "DownloadArchive",
			call: func(ctx context.Context, c *Client) (any, error) {
				return readAllClose(c.DownloadArchive(ctx, "demo", "src"))
			},
			wantMethod: "GET", wantPath: "/v1/sessions/demo/archive", wantQuery: url.Values{"path": {"src"}},
			status: 200, respBody: "tar bytes", want: "tar bytes",
		},
		{
			name: "UploadArchive",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.UploadArchive(ctx, "demo", "src", strings.NewReader("tar bytes"))
			},
			wantMethod: "PUT", wantPath: "/v1/sessions/demo/archive", wantQuery: url.Values{"path": {"src"}},
			wantCT: "application/x-tar", wantBody: "tar bytes",
			status: 200, respBody: `{"path":"/workspace/src","size":9}`,
			want: &api.FileWritten{Path: "/workspace/src", Size: 9},
		},
		{
			name:       "ListImages",
			call:       func(ctx context.Context, c *Client) (any, error) { return c.ListImages(ctx) },
			wantMethod: "GET", wantPath: "/v1/images",
			status: 200, respBody: `{"images":[{"name":"py","digest":"sha256:ab","size":10,"created_at":"2026-11-22T10:00:00Z"}]}`,
			want: []api.Image{{Name: "py", Digest: "sha256:ab", Size: 10, CreatedAt: t0}},
		},
		{
			name: "ImportImage tar",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.ImportImage(ctx, "my image", strings.NewReader("plain tar"))
			},
			wantMethod: "POST", wantPath: "/v1/images", wantQuery: url.Values{"name": {"my image"}},
			wantCT: "application/x-tar", wantBody: "plain tar",
			status: 201, respBody: `{"name":"my image","digest":"sha256:ab","size":9,"created_at":"2026-11-22T10:00:00Z"}`,
			want: &api.Image{Name: "my image", Digest: "sha256:ab", Size: 9, CreatedAt: t0},
		},
		{
			name: "ImportImage gzip",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.ImportImage(ctx, "py", strings.NewReader("\x1f\x8bgz"))
			},
			wantMethod: "POST", wantPath: "/v1/images", wantQuery: url.Values{"name": {"py"}},
			wantCT: "application/gzip", wantBody: "\x1f\x8bgz",
			status: 201, respBody: `{"name":"py","digest":"sha256:cd","size":4,"created_at":"2026-11-22T10:00:00Z"}`,
			want: &api.Image{Name: "py", Digest: "sha256:cd", Size: 4, CreatedAt: t0},
		},
		{
			name:       "Stats",
			call:       func(ctx context.Context, c *Client) (any, error) { return c.Stats(ctx) },
			wantMethod: "GET", wantPath: "/v1/stats",
			status: 200, respBody: `{"sessions":2,"max_sessions":1000,"cgroup_mode":"v2","version":"0.1.0"}`,
			want: &api.Stats{Sessions: 2, MaxSessions: 1000, CgroupMode: "v2", Version: "0.1.0"},
		},
		{
			name:       "Health",
			call:       func(ctx context.Context, c *Client) (any, error) { return nil, c.Health(ctx) },
			wantMethod: "GET", wantPath: "/healthz", status: 200, respBody: `{"status":"ok"}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, got := fakeDaemon(t, tc.status, http.Header{"Content-Type": {"application/json"}}, tc.respBody)
			c := New(srv.URL+"/", WithToken("s3cret"))
			res, err := tc.call(t.Context(), c)
			if err != nil {
				t.Fatalf("%s: unexpected error: %v", tc.name, err)
			}
			if diff := cmp.Diff(tc.want, res); diff != "" {
				t.Errorf("%s result mismatch (-want +got):\n%s", tc.name, diff)
			}
			if got.method != tc.wantMethod || got.path != tc.wantPath {
				t.Errorf("request = %s %s, want %s %s", got.method, got.path, tc.wantMethod, tc.wantPath)
			}
			wantQuery := tc.wantQuery
			if wantQuery == nil {
				wantQuery = url.Values{}
			}
			if diff := cmp.Diff(wantQuery, got.query); diff != "" {
				t.Errorf("query mismatch (-want +got):\n%s", diff)
			}
			if got.contentType != tc.wantCT {
				t.Errorf("Content-Type = %q, want %q", got.contentType, tc.wantCT)
			}
			if got.auth != "Bearer s3cret" {
				t.Errorf("Authorization = %q, want %q", got.auth, "Bearer s3cret")
			}
			if tc.wantCT == "application/json" {
				var w, g any
				if err := json.Unmarshal([]byte(tc.wantBody), &w); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(got.body, &g); err != nil {
					t.Fatalf("request body is not JSON: %v: %q", err, got.body)
				}
				if diff := cmp.Diff(w, g); diff != "" {
					t.Errorf("request body mismatch (-want +got):\n%s", diff)
				}
			} else if string(got.body) != tc.wantBody {
				t.Errorf("request body = %q, want %q", got.body, tc.wantBody)
			}
		})
	}
}

func TestHeaders(t *testing.T) {
	srv, got := fakeDaemon(t, 200, nil, `{"status":"ok"}`)
	if err := New(srv.URL).Health(t.Context()); err != nil {
		t.Fatalf("Health() error: %v", err)
	}
	if got.auth != "" {
		t.Errorf("Authorization without WithToken = %q, want none", got.auth)
	}
	if got.userAgent != DefaultUserAgent {
		t.Errorf("User-Agent = %q, want %q", got.userAgent, DefaultUserAgent)
	}
	if _, err := New(srv.URL, WithUserAgent("agent/2")).ListSessions(t.Context()); err != nil {
		t.Fatalf("ListSessions() error: %v", err)
	}
	if got.userAgent != "agent/2" || got.accept != "application/json" {
		t.Errorf("User-Agent, Accept = %q, %q; want agent/2, application/json", got.userAgent, got.accept)
	}
}

func TestBaseURLPrefix(t *testing.T) {
	var path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.EscapedPath()
		w.WriteHeader(204)
	}))
	defer srv.Close()
	if err := New(srv.URL+"/warren/").DeleteSession(t.Context(), "x"); err != nil {
		t.Fatalf("DeleteSession() error: %v", err)
	}
	if path != "/warren/v1/sessions/x" {
		t.Errorf("path = %q, want /warren/v1/sessions/x", path)
	}
}

func TestWithHTTPClient(t *testing.T) {
	srv, _ := fakeDaemon(t, 200, nil, `{"status":"ok"}`)
	calls := 0
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls++
		return http.DefaultTransport.RoundTrip(r)
	})}
	if err := New(srv.URL, WithHTTPClient(hc)).Health(t.Context()); err != nil {
		t.Fatalf("Health() error: %v", err)
	}
	if calls != 1 {
		t.Errorf("custom http.Client used %d times, want 1", calls)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestErrors(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		header   http.Header
		body     string
		want     *Error
		wantText string
	}{
		{
			name:     "envelope",
			status:   404,
			header:   http.Header{"Content-Type": {"application/json"}},
			body:     `{"error":{"code":"not_found","message":"session \"x\" not found"}}`,
			want:     &Error{StatusCode: 404, Code: "not_found", Message: `session "x" not found`},
			wantText: `not_found: session "x" not found`,
		},
		{
			name:     "rate limited",
			status:   429,
			header:   http.Header{"Content-Type": {"application/json"}, "Retry-After": {"7"}},
			body:     `{"error":{"code":"resource_exhausted","message":"rate limit reached"}}`,
			want:     &Error{StatusCode: 429, Code: "resource_exhausted", Message: "rate limit reached", RetryAfter: 7 * time.Second},
			wantText: "resource_exhausted: rate limit reached",
		},
		{
			name:     "proxy HTML",
			status:   502,
			header:   http.Header{"Content-Type": {"text/html; charset=utf-8"}},
			body:     "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>",
			want:     &Error{StatusCode: 502, Code: "unavailable", Message: "HTTP 502 Bad Gateway"},
			wantText: "unavailable: HTTP 502 Bad Gateway",
		},
		{
			name:     "HTML without title",
			status:   403,
			header:   http.Header{"Content-Type": {"text/html"}},
			body:     "<p>Blocked by\n  <b>policy</b></p>",
			want:     &Error{StatusCode: 403, Code: "permission_denied", Message: "HTTP 403 Forbidden: Blocked by policy"},
			wantText: "permission_denied: HTTP 403 Forbidden: Blocked by policy",
		},
		{
			name:     "plain text",
			status:   500,
			header:   http.Header{"Content-Type": {"text/plain"}},
			body:     "panic: something broke\n",
			want:     &Error{StatusCode: 500, Code: "internal", Message: "HTTP 500 Internal Server Error: panic: something broke"},
			wantText: "internal: HTTP 500 Internal Server Error: panic: something broke",
		},
		{
			name:     "empty body",
			status:   401,
			want:     &Error{StatusCode: 401, Code: "unauthenticated", Message: "HTTP 401 Unauthorized"},
			wantText: "unauthenticated: HTTP 401 Unauthorized",
		},
		{
			name:     "JSON that is no envelope",
			status:   418,
			header:   http.Header{"Content-Type": {"application/json"}},
			body:     `{"message":"short and stout"}`,
			want:     &Error{StatusCode: 418, Code: "unknown", Message: `HTTP 418 I'm a teapot: {"message":"short and stout"}`},
			wantText: `unknown: HTTP 418 I'm a teapot: {"message":"short and stout"}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := fakeDaemon(t, tc.status, tc.header, tc.body)
			_, err := New(srv.URL).GetSession(t.Context(), "x")
			var got *Error
			if !errors.As(err, &got) {
				t.Fatalf("GetSession() error = %v (%T), want *Error", err, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("error mismatch (-want +got):\n%s", diff)
			}
			if err.Error() != tc.wantText {
				t.Errorf("Error() = %q, want %q", err.Error(), tc.wantText)
			}
			wrapped := fmt.Errorf("get session: %w", err)
			if Code(wrapped) != tc.want.Code {
				t.Errorf("Code(wrapped) = %q, want %q", Code(wrapped), tc.want.Code)
			}
			if IsNotFound(wrapped) != (tc.want.Code == "not_found") {
				t.Errorf("IsNotFound(wrapped) = %v", IsNotFound(wrapped))
			}
		})
	}
}

func TestErrorsOfStreams(t *testing.T) {
	srv, _ := fakeDaemon(t, 413, http.Header{"Content-Type": {"application/json"}},
		`{"error":{"code":"too_large","message":"file exceeds 100 MiB"}}`)
	c := New(srv.URL)
	if _, err := c.ReadFile(t.Context(), "x", "big"); Code(err) != "too_large" {
		t.Errorf("ReadFile() error = %v, want too_large", err)
	}
	if _, err := c.DownloadArchive(t.Context(), "x", "big"); Code(err) != "too_large" {
		t.Errorf("DownloadArchive() error = %v, want too_large", err)
	}
	if _, err := c.WriteFile(t.Context(), "x", "big", strings.NewReader("x"), 0); Code(err) != "too_large" {
		t.Errorf("WriteFile() error = %v, want too_large", err)
	}
}

func TestCodeOfOtherErrors(t *testing.T) {
	if got := Code(errors.New("boom")); got != "" {
		t.Errorf("Code(plain error) = %q, want empty", got)
	}
	if IsNotFound(nil) {
		t.Errorf("IsNotFound(nil) = true")
	}
	// A daemon that is not there is a transport error, not an *Error.
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	err := New(addr).Health(t.Context())
	if err == nil || Code(err) != "" {
		t.Errorf("Health() of a closed server = %v, want a transport error", err)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"30", 30 * time.Second},
		{" 5 ", 5 * time.Second},
		{"-3", 0},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"99999999999999999", maxRetryAfter * time.Second},
	}
	for _, tc := range tests {
		if got := parseRetryAfter(tc.in, now); got != tc.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestFormatMode(t *testing.T) {
	tests := []struct {
		in   os.FileMode
		want string
	}{
		{0o644, "0644"},
		{0o755, "0755"},
		{0o7, "0007"},
		{os.ModeSetuid | 0o755, "4755"},
		{os.ModeSetgid | os.ModeSticky | 0o777, "3777"},
		{os.ModeDir | 0o700, "0700"},
	}
	for _, tc := range tests {
		if got := FormatMode(tc.in); got != tc.want {
			t.Errorf("FormatMode(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestUploadStreams shows that WriteFile sends the body as it is produced:
// the daemon sees the first chunk before the second exists.
func TestUploadStreams(t *testing.T) {
	firstSeen := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 5)
		if _, err := io.ReadFull(r.Body, buf); err != nil || string(buf) != "first" {
			t.Errorf("first chunk = %q, %v", buf, err)
		}
		close(firstSeen)
		rest, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, `{"path":"f","size":%d}`, 5+len(rest))
	}))
	defer srv.Close()

	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte("first"))
		select {
		case <-firstSeen:
			pw.Write([]byte("second"))
			pw.Close()
		case <-time.After(10 * time.Second):
			pw.CloseWithError(errors.New("the daemon never saw the first chunk: the body was buffered"))
		}
	}()
	got, err := New(srv.URL).WriteFile(t.Context(), "x", "f", pr, 0)
	if err != nil {
		t.Fatalf("WriteFile() error: %v", err)
	}
	if got.Size != 11 {
		t.Errorf("size = %d, want 11", got.Size)
	}
}

// TestDownloadStreams shows that ReadFile returns before the whole file has
// arrived.
func TestDownloadStreams(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		io.WriteString(w, "head")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "tail")
	}))
	defer srv.Close()

	rc, err := New(srv.URL).ReadFile(t.Context(), "x", "f")
	if err != nil {
		t.Fatalf("ReadFile() error: %v", err)
	}
	defer rc.Close()
	buf := make([]byte, 4)
	if _, err := io.ReadFull(rc, buf); err != nil || string(buf) != "head" {
		t.Fatalf("first bytes = %q, %v", buf, err)
	}
	close(release)
	rest, err := io.ReadAll(rc)
	if err != nil || string(rest) != "tail" {
		t.Errorf("rest = %q, %v; want tail", rest, err)
	}
}

func TestContextCancel(t *testing.T) {
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	defer srv.Close()
	defer close(done)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := New(srv.URL).Exec(ctx, "x", &api.ExecRequest{Command: "sleep 100"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Exec() with an expired context = %v, want context.DeadlineExceeded", err)
	}
}

func TestFileBodyHasLength(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "body")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString("0123456789")
	f.Seek(2, io.SeekStart)
	var length int64
	var transfer []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		length, transfer = r.ContentLength, r.TransferEncoding
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, `{"path":"f","size":%d}`, len(b))
	}))
	defer srv.Close()
	got, err := New(srv.URL).WriteFile(t.Context(), "x", "f", f, 0)
	if err != nil {
		t.Fatalf("WriteFile() error: %v", err)
	}
	if length != 8 || len(transfer) != 0 || got.Size != 8 {
		t.Errorf("Content-Length %d, Transfer-Encoding %q, size %d; want 8, none, 8", length, transfer, got.Size)
	}
}

// An error carries the daemon's request id, the key to its logs.
func TestErrorRequestID(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-ID", "req-123")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"session \"x\" not found"}}`))
	}))
	defer srv.Close()
	_, err := New(srv.URL).GetSession(context.Background(), "x")
	var e *Error
	if !errors.As(err, &e) || e.RequestID != "req-123" || e.Code != "not_found" {
		t.Fatalf("got %#v", err)
	}
}
