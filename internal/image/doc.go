// Package image stores the read-only root filesystems that sessions start
// from: a content-addressed on-disk store with a names index and leases,
// the built-in "base" image synthesized from the host, hardened import of
// directory trees and tar archives, and OCI images pulled from registries
// or imported as OCI layouts and `docker save` archives, flattened with
// go-containerregistry and unpacked by this package's own unpacker.
//
// A stored rootfs is immutable: the package writes an image only into its
// own tmp/ directory and moves it into blobs/ once complete, and it never
// writes into a stored rootfs again. Writes of a session go to the overlay's
// upper layer, which this package does not manage. Content that a name or a
// lease (of a running sandbox, or of a snapshot) points to is never
// garbage-collected.
//
// Import and pull must never write outside the store, follow a symlink out
// of an import source, create device nodes, or copy any host secret into
// the base image (the host's /etc is copied only from an explicit
// allow-list).
package image
