// Package auth says who is calling the daemon: it turns the credentials on
// an HTTP request into an Identity (a tenant, and whether the caller is an
// administrator), and it issues and keeps the credentials it accepts.
//
// Three kinds of credential are accepted:
//
//   - API keys, wrn_<id>_<secret>: a 12-character public id and a
//     32-character secret (160 bits), both lowercase base32. The secret is
//     shown once, when the key is created; a KeyStore keeps only its
//     SHA-256, found by the id and compared in constant time.
//   - Tokens, wrt_<payload>.<mac>: short-lived (at most MaxTokenTTL),
//     HMAC-SHA256-signed copies of an Identity, for browsers, which cannot
//     set headers on WebSockets and so pass ?token= in the URL. The HMAC
//     secret belongs to the daemon process; by default tokens die with it.
//   - JWTs from an operator's identity provider (JWTConfig): HS256 with a
//     shared secret, or RS256 and ES256 with keys from a JWKS URL or file.
//
// Every credential failure is errdefs.ErrUnauthenticated with a message
// that says what was wrong without saying whether an API key id exists.
// Infrastructure failures (the key store, an unreachable JWKS) keep their
// own class: the caller's credentials may be fine.
//
// The package also defines what it needs of storage (KeyStore) and the
// per-tenant settings other layers read (TenantStore: quotas and command
// policy). It must not import internal/store, which implements both.
package auth
