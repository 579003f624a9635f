// Package restart kills real warren daemons (separate processes, SIGKILL)
// at random points and checks that the next start adopts every session
// that was acknowledged, finishes what was half done, and that nothing is
// left on the host at the end.
package restart
