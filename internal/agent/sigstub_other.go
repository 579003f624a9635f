//go:build !amd64 && !arm64

package agent

// catchFatalDefaults is implemented for amd64 and arm64 only; see
// sigstub.go for why it matters.
func catchFatalDefaults() error { return nil }

// filterQueuedFaults is implemented for amd64 and arm64 only; see
// sigstub.go.
func filterQueuedFaults() error { return nil }
