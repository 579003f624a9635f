// Package agentbin carries the in-sandbox program (cmd/warren-agent) inside
// the warren binary and installs it where sandboxes can be started from it.
//
// Why a second program: every sandbox start executes its init, which then
// executes the agent. With the daemon's own binary that is two starts of a
// 33 MB program whose package initialisers (protobuf descriptors, gRPC,
// SQLite, the registry client, Prometheus) take about 10 ms and leave
// megabytes of heap in every idle agent. The small program starts in about
// 2 ms. A binary built without it (plain `go build`, not `make`) still works:
// the runtime then re-executes itself, only slower and bigger.
package agentbin

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/warrenhq/warren/internal/spec"
)

// Name is the program's file name in bin/ and the prefix of its installed
// copies.
const Name = "warren-agent"

//go:embed bin
var files embed.FS

// ErrNotEmbedded means this binary was built without the program.
var ErrNotEmbedded = errors.New("this binary was built without the sandbox agent (build with make)")

// Embedded returns the embedded program, checked to fit this binary: the
// same architecture and no cgo (it must run with nothing but itself inside
// the sandbox).
func Embedded() ([]byte, error) {
	b, err := files.ReadFile("bin/" + Name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotEmbedded
	}
	if err != nil {
		return nil, err
	}
	info, err := buildinfo.Read(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("embedded sandbox agent: %w", err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if settings["GOARCH"] != runtime.GOARCH || settings["GOOS"] != runtime.GOOS {
		return nil, fmt.Errorf("embedded sandbox agent is for %s/%s, this binary for %s/%s", settings["GOOS"], settings["GOARCH"], runtime.GOOS, runtime.GOARCH)
	}
	if settings["CGO_ENABLED"] != "0" {
		return nil, errors.New("embedded sandbox agent was built with cgo; it must be static")
	}
	if info.Path != "github.com/warrenhq/warren/cmd/"+Name {
		return nil, fmt.Errorf("embedded sandbox agent is %s, not cmd/%s", info.Path, Name)
	}
	return b, nil
}

// Memfd returns the embedded program in a sealed, executable memfd: no
// file on disk to protect, and it runs wherever the data directory is
// mounted noexec. It fails where the kernel forbids executable memfds
// (vm.memfd_noexec = 2); Install is the way then.
func Memfd() (*os.File, error) {
	b, err := Embedded()
	if err != nil {
		return nil, err
	}
	return spec.SealedMemfd(Name, b, true)
}

// Install writes the embedded program into dir as warren-agent-<digest>
// (0555, root's), reusing a copy that is already there, removes copies of
// other versions (running sandboxes keep theirs open), and returns its path.
// The directory must let every sandbox's root through: the program is
// executed as that unprivileged host user.
func Install(dir string) (string, error) {
	b, err := Embedded()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	path := filepath.Join(dir, Name+"-"+hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return "", err
	}
	if old, err := os.ReadFile(path); err != nil || !bytes.Equal(old, b) {
		// Written aside and renamed, so no sandbox ever starts from a
		// half-written program and no exec meets ETXTBSY.
		tmp, err := os.CreateTemp(dir, ".tmp-"+Name+"-*")
		if err != nil {
			return "", err
		}
		_, err = tmp.Write(b)
		if err == nil {
			err = tmp.Chmod(0o555)
		}
		if err == nil {
			err = tmp.Sync()
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), path)
		}
		if err != nil {
			os.Remove(tmp.Name())
			return "", fmt.Errorf("install the sandbox agent: %w", err)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		n := e.Name()
		if n != filepath.Base(path) && (strings.HasPrefix(n, Name+"-") || strings.HasPrefix(n, ".tmp-"+Name+"-")) {
			os.Remove(filepath.Join(dir, n))
		}
	}
	return path, nil
}
