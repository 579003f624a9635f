// Package cli is warren's command line: thin cobra commands that parse flags,
// call the daemon through the client package, and print.
package cli
