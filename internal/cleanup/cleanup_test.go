package cleanup

import (
	"slices"
	"testing"
)

func TestCleanup(t *testing.T) {
	var got []int
	func() {
		c := Make(func() { got = append(got, 1) })
		defer c.Clean()
		c.Add(nil)
		c.Add(func() { got = append(got, 2) })
	}()
	if want := []int{2, 1}; !slices.Equal(got, want) {
		t.Errorf("Clean ran %v, want %v", got, want)
	}

	got = nil
	var undo func()
	func() {
		c := Make(func() { got = append(got, 1) })
		defer c.Clean()
		c.Add(func() { got = append(got, 2) })
		undo = c.Release()
	}()
	if len(got) != 0 {
		t.Errorf("Clean after Release ran %v, want nothing", got)
	}
	undo()
	if want := []int{2, 1}; !slices.Equal(got, want) {
		t.Errorf("the released function ran %v, want %v", got, want)
	}

	var z Cleanup // the zero value
	z.Clean()
	z.Release()()
}
