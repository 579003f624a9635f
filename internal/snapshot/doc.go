// Package snapshot turns a sandbox's writable layer into a read-only layer
// that other sandboxes can stack on, and moves such layers in and out as
// archives. It is host-side file work only: no database, no sessions.
//
// # The layer format
//
// A layer is a directory in overlayfs's own format for a lower layer of an
// overlay mounted with userxattr (what every sandbox in a user namespace
// mounts): a deleted file is a whiteout (a character device 0/0), a
// directory that hides the one below it carries the xattr
// user.overlay.opaque. Files are owned in the canonical id space: as if by
// the sandbox's ids 0 to 65535, like image layers, which are owned by the
// host's real root. A sandbox gets a layer as an idmapped mount, so its root
// sees its files as root's whatever block of host ids the sandbox has.
//
// # Re-basing
//
// A sandbox's writable layer is owned by that sandbox's host ids: its root
// is host id B (1,000,000,000 or more), its user 1000 is B+1000. Copy moves
// every owner down by B while it copies, so the copy is canonical; an owner
// outside the block (there should be none) becomes 65534, nobody. The ids in
// POSIX ACLs move the same way. overlayfs's other bookkeeping xattrs
// (origin, impure, redirects) name inodes of the source and are dropped;
// security.capability is dropped (sessions run with no_new_privs, where
// file capabilities grant nothing); user.* xattrs are kept.
//
// # Hostile content
//
// A writable layer is the sandbox's to plant. Copy opens every directory
// and file relative to the descriptor of its parent with O_NOFOLLOW and
// checks what it opened with fstat: it never resolves a path, so a symlink
// or a rename inside the source can only make it copy something else of
// the same source, never anything outside it. Device nodes other than
// whiteouts, and sockets, are skipped. Import (the archive of an untrusted
// client) creates entries only below the new layer's root, resolving their
// parents with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS): no path and no
// link leads outside, device nodes are refused, hard links must name a file
// of the same archive, and sizes and counts are bounded.
package snapshot
