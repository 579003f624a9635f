// Package image stores the read-only root filesystems that sessions start
// from: a content-addressed on-disk store with a names index, the built-in
// "base" image synthesized from the host, and hardened import of directory
// trees and tar archives.
//
// A stored rootfs is immutable: the package writes an image only into its
// own tmp/ directory and moves it into blobs/ once complete, and it never
// writes into a stored rootfs again. Writes of a session go to the overlay's
// upper layer, which this package does not manage.
//
// Import must never write outside the store, follow a symlink out of an
// import source, create device nodes, or copy any host secret into the base
// image (the host's /etc is copied only from an explicit allow-list).
package image
