// Package console tests warren's web console in real browsers against a
// real daemon: Debian's chromium, headless, driven by playwright-core from
// npm (no browser download) through e2e.mjs, the whole console; and
// Debian's firefox-esr over WebDriver BiDi through firefox.mjs, the part a
// browser engine can break. The tests skip, saying which, when node, a
// browser or the npm package (npm ci in this directory) is missing;
// .ci/run installs them all. Screenshots of every page at
// 1280x800 and 390x844 land in test/console/screenshots (git-ignored; CI
// keeps them as artifacts).
package console
