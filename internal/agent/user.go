package agent

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/warrenhq/warren/internal/errdefs"
)

// account is the user sandboxed processes run as.
type account struct {
	uid, gid uint32
	groups   []uint32
	home     string
	name     string
}

// lookupUser resolves a session's user inside the sandbox, from the image's
// own /etc/passwd and /etc/group: "root", a name, "uid" or "uid:gid".
func lookupUser(spec string) (*account, error) {
	if spec == "" || spec == "root" || spec == "0" || spec == "0:0" {
		return nil, nil
	}
	name, grp, _ := strings.Cut(spec, ":")
	acct := &account{name: name}
	found := false
	if err := scanColon("/etc/passwd", func(f []string) bool {
		if len(f) < 7 || (f[0] != name && f[2] != name) {
			return false
		}
		uid, err1 := strconv.ParseUint(f[2], 10, 32)
		gid, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			return false
		}
		acct.uid, acct.gid, acct.home, acct.name = uint32(uid), uint32(gid), f[5], f[0]
		found = true
		return true
	}); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	if !found {
		uid, err := strconv.ParseUint(name, 10, 32)
		if err != nil {
			return nil, errdefs.New(errdefs.ErrInvalidArgument, "user %q is not in the image's /etc/passwd", name)
		}
		acct.uid, acct.gid, acct.home = uint32(uid), uint32(uid), "/"
	}
	if grp != "" {
		gid, err := strconv.ParseUint(grp, 10, 32)
		if err != nil {
			found := false
			// An image without /etc/group names no groups: refused below.
			_ = scanColon("/etc/group", func(f []string) bool {
				if len(f) >= 3 && f[0] == grp {
					if n, err := strconv.ParseUint(f[2], 10, 32); err == nil {
						gid, found = n, true
					}
				}
				return found
			})
			if !found {
				return nil, errdefs.New(errdefs.ErrInvalidArgument, "group %q is not in the image's /etc/group", grp)
			}
		}
		acct.gid = uint32(gid)
	}
	// Supplementary groups that list the user by name; an image without
	// /etc/group has none.
	_ = scanColon("/etc/group", func(f []string) bool {
		if len(f) >= 4 && acct.name != "" {
			for _, m := range strings.Split(f[3], ",") {
				if m == acct.name {
					if n, err := strconv.ParseUint(f[2], 10, 32); err == nil && uint32(n) != acct.gid {
						acct.groups = append(acct.groups, uint32(n))
					}
				}
			}
		}
		return false
	})
	if acct.groups == nil {
		acct.groups = []uint32{}
	}
	return acct, nil
}

func scanColon(path string, f func([]string) bool) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		if f(strings.Split(line, ":")) {
			return nil
		}
	}
	return sc.Err()
}

// processAccount resolves the user one process asks to run as
// (ProcStartRequest.User). Root is a real account here: the session's user
// may be another, and whoever may start processes in the session may start
// them as root of its user namespace, as they could create the session as
// root. Without a user namespace (--allow-no-userns) every process runs as
// the one unprivileged host user, so no other may be asked for.
func (a *Agent) processAccount(user string) (*account, error) {
	if a.spec.RunAs != nil {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "a process of its own user needs a sandbox with a user namespace; this daemon runs without (allow_no_userns)")
	}
	acct, err := lookupUser(user)
	if err != nil {
		return nil, err
	}
	if acct == nil {
		return &account{name: "root", home: "/root", groups: []uint32{}}, nil
	}
	return acct, nil
}

// credential is what the spawner applies to every process.
func (a *account) credential() *syscall.Credential {
	return &syscall.Credential{Uid: a.uid, Gid: a.gid, Groups: a.groups}
}

// env sets the account's HOME, USER and LOGNAME over env.
func (a *account) env(env []string) []string {
	return mergeEnv(env, map[string]string{"HOME": a.home, "USER": a.name, "LOGNAME": a.name})
}

func (a *account) String() string { return fmt.Sprintf("%s (%d:%d)", a.name, a.uid, a.gid) }
