// Package config holds the daemon's settings and where they come from:
// embedded defaults, overridden by a TOML file (strict: an unknown key is an
// error), overridden by WARREN_* environment variables, overridden by the
// flags the user set. Settings lists every setting once, with its TOML key,
// flag, environment variable and meaning; the loader, warren config print
// and docs/CONFIG.md are all built from that list.
package config
