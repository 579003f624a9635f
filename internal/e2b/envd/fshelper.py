# The watches of warren's E2B envd, run inside the sandbox as
# python3 -c <this> watch USER PATH RECURSIVE INCLUDE (envd/fs.go): the one
# filesystem call warren's agent has not (inotify); the others are the
# agent's (agentproto.OpFS). It prints one JSON document per line and exits
# 0; on error it prints {"error": {"code", "message"}} with a Connect code
# and exits 3.
import errno
import grp
import json
import os
import pwd
import stat
import sys

XATTR_PREFIX = "user.e2b."


class Fail(Exception):
    def __init__(self, code, message):
        Exception.__init__(self, message)
        self.code = code
        self.message = message


def oserr(e, path):
    code = {
        errno.ENOENT: "not_found",
        errno.ENOTDIR: "invalid_argument",
        errno.EISDIR: "invalid_argument",
        errno.EEXIST: "already_exists",
        errno.ENOTEMPTY: "failed_precondition",
        errno.EACCES: "permission_denied",
        errno.EPERM: "permission_denied",
        errno.EROFS: "permission_denied",
        errno.ENOSPC: "resource_exhausted",
        errno.EDQUOT: "resource_exhausted",
        errno.ENAMETOOLONG: "invalid_argument",
        errno.ELOOP: "invalid_argument",
        errno.EXDEV: "invalid_argument",
        errno.EINVAL: "invalid_argument",
    }.get(e.errno, "internal")
    if e.errno == errno.ENOENT:
        return Fail(code, "path '%s' does not exist" % path)
    return Fail(code, "%s: %s" % (path, os.strerror(e.errno)))


def home(user):
    try:
        return pwd.getpwnam(user).pw_dir
    except KeyError:
        raise Fail("unauthenticated", "error looking up user '%s': unknown user" % user)


def resolve(user, p):
    if p == "":
        p = "."
    if p == "~" or p.startswith("~/"):
        p = home(user) + p[1:]
    if not os.path.isabs(p):
        p = os.path.join(home(user), p)
    return os.path.normpath(p)


def name_of(table, ident):
    try:
        return table(ident)[0]
    except KeyError:
        return str(ident)


def metadata(p):
    out = {}
    try:
        names = os.listxattr(p, follow_symlinks=False)
    except OSError:
        return out
    for n in names:
        if n.startswith(XATTR_PREFIX):
            try:
                out[n[len(XATTR_PREFIX):]] = os.getxattr(p, n, follow_symlinks=False).decode("utf-8", "replace")
            except OSError:
                pass
    return out


def entry(p, st=None):
    if st is None:
        st = os.lstat(p)
    m = st.st_mode
    e = {
        "name": os.path.basename(p) or p,
        "path": p,
        "size": st.st_size,
        "mode": stat.S_IMODE(m),
        "permissions": stat.filemode(m),
        "owner": name_of(pwd.getpwuid, st.st_uid),
        "group": name_of(grp.getgrgid, st.st_gid),
        "mtime_ns": st.st_mtime_ns,
        "metadata": metadata(p),
    }
    if stat.S_ISLNK(m):
        e["type"] = "symlink"
        e["symlink_target"] = os.path.realpath(p)
    elif stat.S_ISDIR(m):
        e["type"] = "dir"
    elif stat.S_ISREG(m):
        e["type"] = "file"
    else:
        e["type"] = "other"
    return e


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def op_watch(user, p, recursive, include):
    import ctypes
    import select
    import struct

    p = resolve(user, p)
    recursive, include = recursive == "1", include == "1"
    try:
        st = os.stat(p)
    except OSError as e:
        raise oserr(e, p)
    if not stat.S_ISDIR(st.st_mode):
        raise Fail("invalid_argument", "path '%s' is not a directory" % p)
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_CLOEXEC)
    if fd < 0:
        raise Fail("internal", "inotify_init1: " + os.strerror(ctypes.get_errno()))
    IN_MODIFY, IN_ATTRIB, IN_MOVED_FROM, IN_MOVED_TO = 0x2, 0x4, 0x40, 0x80
    IN_CREATE, IN_DELETE, IN_DELETE_SELF, IN_MOVE_SELF = 0x100, 0x200, 0x400, 0x800
    IN_IGNORED, IN_ISDIR, IN_Q_OVERFLOW = 0x8000, 0x40000000, 0x4000
    mask = IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF
    wds = {}
    known = set()

    def event(kind, path):
        ev = {"name": os.path.relpath(path, p), "type": kind}
        if include:
            try:
                ev["entry"] = entry(path)
            except OSError:
                pass
        emit(ev)


    def add(d, late=False):
        # late: d appeared while watching; what it already holds was
        # created before its watch could see it, and is reported so.
        wd = libc.inotify_add_watch(fd, os.fsencode(d), mask)
        if wd < 0:
            if d == p:
                raise Fail("internal", "inotify_add_watch %s: %s" % (d, os.strerror(ctypes.get_errno())))
            return
        wds[wd] = d
        try:
            names = sorted(os.listdir(d))
        except OSError:
            return
        for n in names:
            c = os.path.join(d, n)
            if c in known:
                continue
            known.add(c)
            if late:
                event("create", c)
            if recursive and os.path.isdir(c) and not os.path.islink(c):
                add(c, late)

    add(p)
    emit({"start": True})

    # The agent writes an upload to a hidden temporary file and renames it
    # over the target: that rename is reported as the write it stands for.
    uploads = {}
    buf = b""
    while True:
        select.select([fd], [], [])
        buf += os.read(fd, 65536)
        while len(buf) >= 16:
            wd, m, cookie, ln = struct.unpack_from("iIII", buf)
            if len(buf) < 16 + ln:
                break
            name = os.fsdecode(buf[16:16 + ln].rstrip(b"\0"))
            buf = buf[16 + ln:]
            if m & IN_Q_OVERFLOW:
                continue
            d = wds.get(wd)
            if d is None:
                continue
            if m & IN_IGNORED:
                del wds[wd]
                continue
            if not name:
                if m & (IN_DELETE_SELF | IN_MOVE_SELF) and d == p:
                    return {}
                continue
            path = os.path.join(d, name)
            if name.startswith(".warren-upload-"):
                if m & IN_MOVED_FROM:
                    uploads[cookie] = True
                continue
            if m & IN_MOVED_TO and uploads.pop(cookie, False):
                if path not in known:
                    known.add(path)
                    event("create", path)
                event("write", path)
                continue
            if m & (IN_CREATE | IN_MOVED_TO):
                known.add(path)
                event("create", path)
                if recursive and m & IN_ISDIR:
                    add(path, True)
            elif m & IN_MODIFY:
                event("write", path)
            elif m & IN_ATTRIB:
                event("chmod", path)
            elif m & IN_DELETE:
                known.discard(path)
                event("remove", path)
            elif m & IN_MOVED_FROM:
                known.discard(path)
                event("rename", path)


OPS = {"watch": op_watch}


def main():
    op, user, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    try:
        out = OPS[op](user, *args)
    except Fail as f:
        sys.stdout.write(json.dumps({"error": {"code": f.code, "message": f.message}}))
        sys.exit(3)
    except BrokenPipeError:
        sys.exit(0)
    sys.stdout.write(json.dumps(out))


main()
