// Package cleanup gives a function one idiom for undoing what it acquired
// when it fails part-way (gVisor's pkg/cleanup):
//
//	c := cleanup.Make(func() { f.Close() })
//	defer c.Clean()
//	... acquire more, c.Add(undo) for each ...
//	c.Release() // success: the caller owns it all now
//
// Clean runs the undo functions in reverse order of their addition, once;
// after Release it does nothing. It must never hold logic of its own.
package cleanup

// Cleanup holds the undo functions of a function that has not finished.
// The zero value is ready to use.
type Cleanup struct {
	fns []func()
}

// Make returns a Cleanup that runs f (nil for none yet).
func Make(f func()) Cleanup {
	c := Cleanup{}
	c.Add(f)
	return c
}

// Add adds f, to run before every function added earlier.
func (c *Cleanup) Add(f func()) {
	if f != nil {
		c.fns = append(c.fns, f)
	}
}

// Clean runs the undo functions, last added first, and forgets them.
func (c *Cleanup) Clean() {
	for i := len(c.fns) - 1; i >= 0; i-- {
		c.fns[i]()
	}
	c.fns = nil
}

// Release forgets the undo functions without running them and returns one
// function that runs them all, for a caller that takes ownership.
func (c *Cleanup) Release() func() {
	fns := c.fns
	c.fns = nil
	return func() {
		for i := len(fns) - 1; i >= 0; i-- {
			fns[i]()
		}
	}
}
