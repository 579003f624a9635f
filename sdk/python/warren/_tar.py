"""Directories as tar, both ways, without holding them in memory."""

from __future__ import annotations

import os
import tarfile
import tempfile
from typing import IO

SPOOL = 8 << 20  # a tar up to this size stays in memory; a larger one spills to a temporary file


def pack_dir(local_dir: str) -> IO[bytes]:
    """A tar of local_dir's contents (names relative to it), rewound."""
    if not os.path.isdir(local_dir):
        raise NotADirectoryError(local_dir)
    f = tempfile.SpooledTemporaryFile(max_size=SPOOL)
    with tarfile.open(fileobj=f, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name in sorted(os.listdir(local_dir)):
            t.add(os.path.join(local_dir, name), arcname=name)
    f.seek(0)
    return f


def _inside(root: str, path: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def safe_extract(fileobj: IO[bytes], dest: str) -> int:
    """Extracts the tar stream fileobj into dest and returns how many
    entries it wrote. The tar comes from a sandbox, so it is hostile: an
    entry named absolutely or with "..", a link that points out of dest, a
    device node, or a path through a symlink it made earlier is refused
    (ValueError) before anything is written for it."""
    os.makedirs(dest, exist_ok=True)
    root = os.path.realpath(dest)
    n = 0
    with tarfile.open(fileobj=fileobj, mode="r|*") as t:
        for m in t:
            if os.path.isabs(m.name) or ".." in m.name.split("/"):
                raise ValueError(f"tar entry {m.name!r} leaves the destination")
            name = "/".join(p for p in m.name.split("/") if p not in ("", "."))
            if not name:
                continue
            m.name = name
            target = os.path.join(root, name)
            if not _inside(root, os.path.realpath(os.path.dirname(target))):
                raise ValueError(f"tar entry {m.name!r} goes through a link out of the destination")
            if m.issym():
                link = os.path.join(os.path.dirname(target), m.linkname)
                if os.path.isabs(m.linkname) or not _inside(root, os.path.normpath(link)):
                    raise ValueError(f"tar entry {m.name!r} links out of the destination ({m.linkname!r})")
            elif m.islnk():
                if not _inside(root, os.path.normpath(os.path.join(root, m.linkname))):
                    raise ValueError(f"tar entry {m.name!r} links out of the destination ({m.linkname!r})")
            elif not (m.isfile() or m.isdir()):
                continue  # devices and fifos are not files to download
            m.mode &= 0o777
            m.uid = m.gid = os.getuid()
            m.uname = m.gname = ""
            if hasattr(tarfile, "data_filter"):
                t.extract(m, root, set_attrs=True, filter="fully_trusted")
            else:
                t.extract(m, root, set_attrs=True)
            n += 1
    return n
