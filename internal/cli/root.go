package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon"
)

// DefaultAddr is the daemon's address when neither --addr nor WARREN_ADDR
// names one.
const DefaultAddr = "http://127.0.0.1:7433"

// Main runs warren's command line with args (without the program name) and
// returns the process's exit code: 0, 1 on an error (printed to stderr as
// "warren: <message>"), or for exec, run and shell the remote command's own
// exit code.
func Main(args []string) int {
	return run(context.Background(), args, &app{
		stdin:    os.Stdin,
		stdout:   os.Stdout,
		stderr:   os.Stderr,
		getenv:   os.Getenv,
		readFile: os.ReadFile,
		now:      time.Now,
	})
}

// app is what the client commands share: the process's streams,
// environment and files (replaced in tests) and the persistent flags.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// readFile reads the local admin key (localAdminKey); nil reads
	// nothing.
	readFile func(string) ([]byte, error)
	now      func() time.Time

	addr, token string // --addr and --token

	// keyFile is the admin key file localAdminKey tried ("" if none was
	// tried), keyErr why it could not be read, keySent whether its key
	// went with the calls. When the daemon refuses the credentials, run
	// names the file and how to pick another.
	keyFile string
	keyErr  error
	keySent bool
}

// exitError ends warren with exit code code. A non-empty msg is printed
// as "warren: msg"; an empty one prints nothing more, because the command's
// own output (or the reports before it) already said it all. exec and run
// return it with the command's exit code.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	return fmt.Sprintf("exit status %d", e.code)
}

// run builds the root command, runs it with args and returns the exit code.
func run(ctx context.Context, args []string, a *app) int {
	root := newRootCommand(a)
	root.SetArgs(args)
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	err := root.ExecuteContext(ctx)
	var ee exitError
	switch {
	case err == nil:
		return 0
	case client.Code(err) == "unauthenticated" && a.keyFile != "":
		a.explainKey(err)
		return 1
	case errors.As(err, &ee):
		if ee.msg != "" {
			fmt.Fprintf(a.stderr, "warren: %s\n", ee.msg)
		}
		return ee.code
	case errors.Is(err, syscall.ECONNREFUSED):
		fmt.Fprintf(a.stderr, "warren: %v\nwarren: is the daemon running (warren serve)? --addr or WARREN_ADDR name it\n", err)
		return 1
	default:
		fmt.Fprintf(a.stderr, "warren: %v\n", err)
		return 1
	}
}

// newRootCommand builds the "warren" command with every subcommand.
func newRootCommand(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:           "warren",
		Short:         "warren runs isolated, stateful Linux sandboxes for AI agents and untrusted code",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&a.addr, "addr", "", "daemon address (env WARREN_ADDR, default "+DefaultAddr+")")
	pf.StringVar(&a.token, "token", "", "API key sent as a bearer token (env WARREN_TOKEN; default for a local daemon: <data dir>/"+daemon.AdminKeyFile+")")

	addDaemonCommands(root)
	root.AddCommand(
		newSessionCommand(a),
		newExecCommand(a),
		newRunCommand(a),
		newShellCommand(a),
		newPortForwardCommand(a),
		newNetworkCommand(a),
		newStartCommand(a),
		newPsCommand(a),
		newLogsCommand(a),
		newKillCommand(a),
		newCpCommand(a),
		newImageCommand(a),
		newKeysCommand(a),
		newTokenCommand(a),
		newTenantsCommand(a),
		newAuditCommand(a),
		newMCPCommand(a),
		newBenchCommand(a),
		newWorkspaceCommand(a),
		newSnapshotCommand(a),
		newForkCommand(a),
		newConfigCommand(a),
		newNodeCommand(a),
	)
	return root
}

// client returns a client of the daemon that the flags and environment name.
func (a *app) client() *client.Client {
	addr := a.addr
	if addr == "" {
		addr = a.getenv("WARREN_ADDR")
	}
	if addr == "" {
		addr = DefaultAddr
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	token := a.token
	if token == "" {
		token = a.getenv("WARREN_TOKEN")
	}
	if token == "" && isLoopback(addr) {
		token = a.localAdminKey()
	}
	opts := []client.Option{client.WithUserAgent("warren-cli")}
	if token != "" {
		opts = append(opts, client.WithToken(token))
	}
	return client.New(addr, opts...)
}

// localAdminKey returns the admin key that the local daemon wrote to
// daemon.AdminKeyFile in its data directory on its first start, or ""
// when it cannot be read: the call then goes without a token (a daemon
// run with --no-auth needs none), and if the daemon refuses it, run says
// why the file gave no key (explainKey).
func (a *app) localAdminKey() string {
	if a.readFile == nil {
		return ""
	}
	dir := a.getenv("WARREN_DATA_DIR")
	if dir == "" {
		dir = config.DefaultDataDir
	}
	a.keyFile = filepath.Join(dir, daemon.AdminKeyFile)
	b, err := a.readFile(a.keyFile)
	if err != nil {
		a.keyErr = err
		return ""
	}
	key := strings.TrimSpace(string(b))
	a.keySent = key != ""
	return key
}

// explainKey prints err, a refusal of the credentials, when they came
// (or should have come) from the local admin key file: which file, what
// was wrong with it, and how to pick another key. The daemon's own
// "missing credentials" would not say that the file exists but this user
// cannot read it, nor that the key sent was another daemon's.
func (a *app) explainKey(err error) {
	how := "pass a key with --token or WARREN_TOKEN, or set WARREN_DATA_DIR to the daemon's data directory to use its " + daemon.AdminKeyFile
	switch {
	case errors.Is(a.keyErr, fs.ErrPermission):
		a.warn("cannot read %s: permission denied", a.keyFile)
		a.warn("the admin key file is root's (mode 0600): run as root (sudo), or %s", how)
	case errors.Is(a.keyErr, fs.ErrNotExist):
		a.warn("%v", err)
		a.warn("no admin key at %s: %s", a.keyFile, how)
	case a.keyErr != nil:
		a.warn("cannot read %s: %v", a.keyFile, a.keyErr)
		a.warn("%s", how)
	case a.keySent:
		a.warn("%v", err)
		a.warn("sent the admin key from %s, which this daemon does not know (is it another daemon's?): %s", a.keyFile, how)
	default:
		a.warn("%v", err)
		a.warn("%s is empty: %s", a.keyFile, how)
	}
}

// isLoopback reports whether the daemon at addr (a URL) is on this host:
// localhost, 127.0.0.0/8 or ::1. Only then may the local admin key be sent.
func isLoopback(addr string) bool {
	u, err := url.Parse(addr)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// warn prints a note for the user to stderr.
func (a *app) warn(format string, args ...any) {
	fmt.Fprintf(a.stderr, "warren: "+format+"\n", args...)
}
