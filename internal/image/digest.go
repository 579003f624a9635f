package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// The canonical digest of an image is the SHA-256 of this byte stream:
//
//	"warren-image-v1\n"
//	one record per entry of the rootfs, the rootfs directory itself first
//	one config record
//
// The entries are visited depth first, each directory before its
// contents, the entries of a directory in byte order of their names. An
// entry record is
//
//	kind SP perm SP uid SP gid SP len(path) ":" path SP len(data) ":" data "\n"
//
// where
//   - kind is "d" (directory), "f" (regular file) or "l" (symlink);
//   - perm is the permission bits with setuid (04000), setgid (02000) and
//     sticky (01000), as four octal digits, e.g. "0755", "1777", "4755";
//   - uid and gid are decimal numbers;
//   - path is the slash-separated path relative to the rootfs, "." for the
//     rootfs itself, e.g. "usr/bin/env";
//   - data is the content of a regular file, the target of a symlink and
//     empty for a directory;
//   - every length is a decimal number of bytes.
//
// A file with several hard links is a regular file at each of its paths.
// Times, xattrs and inode numbers are not part of the digest, so the same
// tree gives the same digest however it was imported. The config record is
//
//	"config" SP len(json) ":" json "\n"
//
// where json is the JSON encoding of the config struct (host_dirs, env,
// working_dir, shell; empty fields left out). A rootfs never holds other
// kinds of files: import skips them, and digestTree refuses them.

const digestMagic = "warren-image-v1\n"

// digestTree computes the canonical digest of rootfs with cfg, and the
// number of bytes of its regular files.
func digestTree(ctx context.Context, rootfs string, cfg config) (digest string, size int64, err error) {
	root, err := openDir(rootfs)
	if err != nil {
		return "", 0, err
	}
	defer root.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(root.Fd()), &st); err != nil {
		return "", 0, err
	}
	d := &digester{ctx: ctx, h: sha256.New()}
	io.WriteString(d.h, digestMagic)
	d.header('d', &st, ".", 0)
	d.h.Write([]byte{'\n'})
	if err := d.dir(root, "", 1); err != nil {
		return "", 0, fmt.Errorf("digest %s: %w", rootfs, err)
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		return "", 0, err
	}
	fmt.Fprintf(d.h, "config %d:%s\n", len(js), js)
	return "sha256:" + hex.EncodeToString(d.h.Sum(nil)), d.size, nil
}

type digester struct {
	ctx  context.Context
	h    hash.Hash
	size int64
}

// header writes a record up to and including the ":" before the data.
func (d *digester) header(kind byte, st *unix.Stat_t, path string, dataLen int64) {
	b := make([]byte, 0, 64+len(path))
	b = append(b, kind, ' ')
	b = fmt.Appendf(b, "%04o", st.Mode&0o7777)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(st.Uid), 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(st.Gid), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(path)), 10)
	b = append(b, ':')
	b = append(b, path...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, dataLen, 10)
	b = append(b, ':')
	d.h.Write(b)
}

func (d *digester) dir(dir *os.File, rel string, depth int) error {
	names, err := readNames(dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := d.ctx.Err(); err != nil {
			return err
		}
		path := name
		if rel != "" {
			path = rel + "/" + name
		}
		st, err := lstatAt(dir, name)
		if err != nil {
			return err
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if depth > maxDepth {
				return fmt.Errorf("%s: more than %d levels deep", path, maxDepth)
			}
			d.header('d', st, path, 0)
			d.h.Write([]byte{'\n'})
			sub, err := openDirAt(dir, name)
			if err != nil {
				return err
			}
			err = sameFile(sub, st, unix.S_IFDIR)
			if err == nil {
				err = d.dir(sub, path, depth+1)
			}
			sub.Close()
			if err != nil {
				return err
			}
		case unix.S_IFREG:
			f, err := openFileAt(dir, name, st)
			if err != nil {
				return err
			}
			d.header('f', st, path, st.Size)
			n, err := io.Copy(d.h, io.LimitReader(f, st.Size))
			f.Close()
			if err == nil && n != st.Size {
				err = fmt.Errorf("%s changed while it was read", path)
			}
			if err != nil {
				return err
			}
			d.h.Write([]byte{'\n'})
			d.size += st.Size
		case unix.S_IFLNK:
			target, err := readlinkAt(dir, name)
			if err != nil {
				return err
			}
			d.header('l', st, path, int64(len(target)))
			io.WriteString(d.h, target)
			d.h.Write([]byte{'\n'})
		default:
			return fmt.Errorf("%s: unexpected file type %#o in a rootfs", path, st.Mode&unix.S_IFMT)
		}
	}
	return nil
}
