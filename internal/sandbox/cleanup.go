package sandbox

// cleanup undoes, in reverse order, what a function built before it
// failed; once the function succeeds, Release keeps it all. The idiom is
// gVisor's pkg/cleanup:
//
//	c := makeCleanup(func() { undoFirst() })
//	defer c.Clean()
//	... c.Add(undoSecond) ...
//	c.Release()
//	return result, nil
//
// It is private to this package on purpose: one small copy per user keeps
// the dependency graph as it is.
type cleanup struct{ undo []func() }

// makeCleanup returns a cleanup that starts with f (nil: nothing).
func makeCleanup(f func()) cleanup {
	var c cleanup
	c.Add(f)
	return c
}

// Add pushes f to be run first when Clean runs.
func (c *cleanup) Add(f func()) {
	if f != nil {
		c.undo = append(c.undo, f)
	}
}

// Clean runs what was added, last first, unless Release ran.
func (c *cleanup) Clean() {
	for i := len(c.undo) - 1; i >= 0; i-- {
		c.undo[i]()
	}
	c.undo = nil
}

// Release forgets what was added: the work stands.
func (c *cleanup) Release() { c.undo = nil }
