package cgroup

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Check reports whether warren's parent cgroup exists and can be written
// to, in every hierarchy it uses: whether a sandbox started now could be
// placed under it.
func (h *Hierarchy) Check() error {
	for _, d := range h.dirs("") {
		if err := unix.Access(d, unix.W_OK); err != nil {
			return fmt.Errorf("the cgroup parent %s is not usable: %w", d, err)
		}
	}
	return nil
}
