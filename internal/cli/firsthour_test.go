package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/testutil"
)

// helperEnv makes this test binary run warren's command line instead of
// the tests (asUser): init runs before TestMain and the flag parsing.
const helperEnv = "WARREN_CLI_TEST_MAIN"

func init() {
	if os.Getenv(helperEnv) == "1" {
		os.Exit(Main(os.Args[1:]))
	}
}

// nobody is the unprivileged user the tests run warren as.
const nobody = 65534

// asUser runs warren's command line with args as uid and gid nobody,
// with env, and returns its stderr and exit code. The test binary is
// copied where that user may execute it.
func asUser(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	testutil.RequiresRoot(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(testutil.TraversableDir(t), "warren")
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = append([]string{helperEnv + "=1", "PATH=/usr/bin:/bin", "HOME=/"}, env...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return stderr.String(), 0
	case errors.As(err, &ee):
		return stderr.String(), ee.ExitCode()
	default:
		t.Fatalf("run warren %v as uid %d: %v", args, nobody, err)
		return "", 0
	}
}

// TestServeNeedsRoot runs serve as an unprivileged user: it must say to
// run as root and point at warren doctor, and create nothing first (no
// data directory, so no half-made state that root must clean up).
func TestServeNeedsRoot(t *testing.T) {
	dataDir := filepath.Join(testutil.TraversableDir(t), "data")
	// The parent is root's and 0711: a daemon that tried to create the
	// data directory would fail with EACCES rather than get far enough to
	// leave it, so the check is also that the error is the privilege one.
	stderr, code := asUser(t, nil, "serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--log-format", "text")
	if code != 1 {
		t.Errorf("warren serve as uid %d: exit %d, want 1; stderr:\n%s", nobody, code, stderr)
	}
	for _, want := range []string{"must run as root", "warren doctor"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("warren serve as uid %d said %q; want it to contain %q", nobody, stderr, want)
		}
	}
	if _, err := os.Stat(dataDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("warren serve as uid %d left %s (stat: %v)", nobody, dataDir, err)
	}
}

// TestServeNeedsRootWritesNothing gives the unprivileged user a data
// directory it could write, so only the order of the checks keeps serve
// from writing into it.
func TestServeNeedsRootWritesNothing(t *testing.T) {
	dataDir := filepath.Join(testutil.TraversableDir(t), "data")
	if err := os.Mkdir(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dataDir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	stderr, code := asUser(t, nil, "serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(stderr, "must run as root") {
		t.Errorf("warren serve as uid %d: exit %d, stderr %q; want exit 1 and \"must run as root\"", nobody, code, stderr)
	}
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("warren serve as uid %d created %s in its data directory before it checked privileges", nobody, e.Name())
	}
	if fi, err := os.Stat(dataDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("warren serve as uid %d changed its data directory: %v, %v", nobody, fi.Mode(), err)
	}
}

// missingCredentials is the daemon's answer to a call without a key.
var missingCredentials = reply{status: 401, body: `{"error":{"code":"unauthenticated","message":"missing credentials: send Authorization: Bearer <API key or token>, or X-API-Key: <API key>"}}`}

// TestUnreadableAdminKey runs a client command as a user who may not read
// the local daemon's admin.key: it must say so, not "missing
// credentials".
func TestUnreadableAdminKey(t *testing.T) {
	_, srv := newFakeAPI(t, map[string]reply{"GET /v1/sessions": missingCredentials})
	dataDir := testutil.TraversableDir(t)
	keyFile := filepath.Join(dataDir, "admin.key")
	if err := os.WriteFile(keyFile, []byte("wrn_x_y\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr, code := asUser(t, []string{"WARREN_ADDR=" + srv.URL, "WARREN_DATA_DIR=" + dataDir}, "session", "ls")
	if code != 1 {
		t.Errorf("warren session ls as uid %d: exit %d, want 1", nobody, code)
	}
	if want := "warren: cannot read " + keyFile + ": permission denied\n"; !strings.HasPrefix(stderr, want) {
		t.Errorf("warren session ls as uid %d said:\n%s\nwant it to start with %q", nobody, stderr, want)
	}
	for _, want := range []string{"run as root", "--token"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("warren session ls as uid %d said %q; want it to contain %q", nobody, stderr, want)
		}
	}
	if strings.Contains(stderr, "missing credentials") {
		t.Errorf("warren session ls as uid %d said %q; the file exists, the credentials are not missing", nobody, stderr)
	}
}

// TestKeyFileNamedOnRefusal checks what the CLI says when the daemon
// refuses the credentials it took from the local admin key file: which
// file it used and how to pick another key.
func TestKeyFileNamedOnRefusal(t *testing.T) {
	invalid := reply{status: 401, body: `{"error":{"code":"unauthenticated","message":"invalid API key"}}`}
	tests := []struct {
		name     string
		answer   reply
		env      map[string]string
		readFile func(string) ([]byte, error)
		want     []string
	}{
		{
			name: "another daemon's key", answer: invalid,
			readFile: func(string) ([]byte, error) { return []byte("wrn_a_b\n"), nil },
			want: []string{"unauthenticated: invalid API key\n", "sent the admin key from /var/lib/warren/admin.key",
				"--token or WARREN_TOKEN", "WARREN_DATA_DIR"},
		},
		{
			name: "key file of WARREN_DATA_DIR", answer: invalid, env: map[string]string{"WARREN_DATA_DIR": "/srv/w"},
			readFile: func(string) ([]byte, error) { return []byte("wrn_a_b\n"), nil },
			want:     []string{"sent the admin key from /srv/w/admin.key"},
		},
		{
			name: "no key file", answer: missingCredentials,
			readFile: func(string) ([]byte, error) { return nil, fs.ErrNotExist },
			want:     []string{"missing credentials", "no admin key at /var/lib/warren/admin.key", "--token"},
		},
		{
			name: "unreadable key file", answer: missingCredentials,
			readFile: func(p string) ([]byte, error) { return nil, &fs.PathError{Op: "open", Path: p, Err: syscall.EACCES} },
			want:     []string{"warren: cannot read /var/lib/warren/admin.key: permission denied\n", "run as root"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, srv := newFakeAPI(t, map[string]reply{"GET /v1/sessions": tc.answer})
			env := map[string]string{"WARREN_ADDR": srv.URL}
			for k, v := range tc.env {
				env[k] = v
			}
			var out, errOut bytes.Buffer
			code := run(t.Context(), []string{"session", "ls"}, &app{
				stdin: strings.NewReader(""), stdout: &out, stderr: &errOut,
				getenv:   func(k string) string { return env[k] },
				readFile: tc.readFile,
				now:      func() time.Time { return now },
			})
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			for _, want := range tc.want {
				if !strings.Contains(errOut.String(), want) {
					t.Errorf("stderr:\n%s\nwant it to contain %q", errOut.String(), want)
				}
			}
		})
	}
	// With --token the user chose the key: the daemon's refusal stands
	// alone, and no file is named.
	_, srv := newFakeAPI(t, map[string]reply{"GET /v1/sessions": invalid})
	var errOut bytes.Buffer
	run(t.Context(), []string{"--addr", srv.URL, "--token", "wrn_mine", "session", "ls"}, &app{
		stdin: strings.NewReader(""), stdout: io.Discard, stderr: &errOut,
		getenv:   func(string) string { return "" },
		readFile: func(string) ([]byte, error) { t.Error("read the key file despite --token"); return nil, nil },
		now:      func() time.Time { return now },
	})
	if got, want := errOut.String(), "warren: list sessions: unauthenticated: invalid API key\n"; got != want {
		t.Errorf("with --token: stderr %q, want %q", got, want)
	}
}

// TestShellPipedStdinEnds pipes commands into warren shell on a real
// daemon: it must run them and end when stdin is used up. The first
// command still runs when the input ends, so a single Ctrl-D sent then is
// lost to the terminal's mode switch, and the shell would wait forever.
func TestShellPipedStdinEnds(t *testing.T) {
	h := daemontest.Start(t, nil)
	if _, err := h.Client.CreateSession(t.Context(), &api.CreateSessionRequest{ID: "piped"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	env := map[string]string{"WARREN_ADDR": h.URL, "WARREN_TOKEN": h.AdminKey}
	var out, errOut lockedBuffer
	start := time.Now()
	code := run(ctx, []string{"shell", "piped"}, &app{
		stdin:  strings.NewReader("sleep 1; echo first-$((6*7))\necho second-$((6*8))\n"),
		stdout: &out, stderr: &errOut,
		getenv: func(k string) string { return env[k] },
		now:    time.Now,
	})
	if ctx.Err() != nil {
		t.Fatalf("warren shell with piped stdin did not end in 30 s; stdout %q", out.String())
	}
	if code != 0 {
		t.Errorf("warren shell with piped stdin: exit %d, stderr %q", code, errOut.String())
	}
	for _, want := range []string{"first-42", "second-48"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout %q lacks %q", out.String(), want)
		}
	}
	t.Logf("ended %v after start", time.Since(start).Round(time.Millisecond))
	// The shell ended with the connection: the session has no process left
	// running.
	procs, err := h.Client.ListProcesses(t.Context(), "piped")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if p.State == "running" {
			t.Errorf("process %s (%v) still running after the shell ended", p.ID, p.Command)
		}
	}
}
