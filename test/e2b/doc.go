// Package e2b runs E2B's own JavaScript SDK tests (the conformance kit in
// ../shared/conformance/e2b, or $WARREN_E2B_KIT) against a warren daemon's
// E2B-compatible API, and holds the benchmark of E2B's time to interactive
// next to warren's native API (bench.mjs). The tests are E2B's code and
// stay in the kit; this package only starts the daemon, makes an
// E2B-format key and runs the kit's run.sh with skip.txt.
package e2b
