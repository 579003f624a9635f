// Package session is warren's domain core: the session lifecycle (create,
// exec, files, delete), idle and lifetime expiry, the session cap, and the
// state machine. It owns the interfaces of what it needs from below (Store,
// Runtime, Images) and knows nothing about HTTP or any other transport.
package session
