// Package console tests warren's web console in a real browser: Debian's
// chromium, headless, driven by playwright-core from npm (no browser
// download) through e2e.mjs, against a real daemon. The test skips, saying
// which, when node, chromium or the npm package (npm ci in this directory)
// is missing; .ci/run installs all three. Screenshots of every page at
// 1280x800 and 390x844 land in test/console/screenshots (git-ignored; CI
// keeps them as artifacts).
package console
