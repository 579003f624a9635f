package auth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// The values of Identity.Method.
const (
	MethodKey   = "key"
	MethodToken = "token"
	MethodJWT   = "jwt"
)

// Identity is who made a request.
type Identity struct {
	// Tenant is the tenant the caller acts for, a ValidTenant.
	Tenant string
	// KeyID is the API key's public id: the key used, or the key a token
	// was issued for. Empty for JWTs.
	KeyID string
	// Subject is the JWT's sub, or the sub of the JWT a token was issued
	// for. Empty for API keys.
	Subject string
	// Admin callers may manage every tenant.
	Admin bool
	// Method is how the caller proved it: MethodKey, MethodToken or
	// MethodJWT.
	Method string
}

// Config configures an Authenticator.
type Config struct {
	// Keys keeps the API keys (required).
	Keys KeyStore
	// JWT, if set, accepts JWTs as bearer credentials.
	JWT *JWTConfig
	// TokenSecret signs tokens: at least 32 bytes. If nil, New picks a
	// random one, so tokens stop working when the daemon restarts (they
	// live minutes; browsers ask for new ones).
	TokenSecret []byte
	// Now is the clock; time.Now if nil.
	Now func() time.Time
}

// Authenticator authenticates requests and issues API keys and tokens. It
// is safe for concurrent use.
type Authenticator struct {
	keys        KeyStore
	jwt         *jwtVerifier // nil: JWTs are refused
	tokenSecret []byte
	now         func() time.Time

	// dummyHash stands in for the stored hash of an unknown key id, so
	// that an unknown id costs the same hashing and comparison as a known
	// one. It is random: no secret hashes to it.
	dummyHash []byte

	// testHookDummy, if set, runs when the dummy hash is compared.
	testHookDummy func()

	cache keyCache
}

// maxCredentialLen bounds a credential: keys and tokens are far shorter,
// JWTs with many claims reach a few KiB.
const maxCredentialLen = 16 << 10

// New returns an Authenticator. It reads Config.JWT.JWKSFile, if set, but
// fetches a JWKS URL only when a token first needs it, so the identity
// provider being down does not stop the daemon from starting.
func New(cfg Config) (*Authenticator, error) {
	if cfg.Keys == nil {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "auth: no key store")
	}
	a := &Authenticator{keys: cfg.Keys, now: cfg.Now, dummyHash: make([]byte, 32)}
	if a.now == nil {
		a.now = time.Now
	}
	rand.Read(a.dummyHash)
	switch {
	case cfg.TokenSecret == nil:
		a.tokenSecret = make([]byte, 32)
		rand.Read(a.tokenSecret)
	case len(cfg.TokenSecret) < 32:
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "auth: token secret of %d bytes, want at least 32", len(cfg.TokenSecret))
	default:
		a.tokenSecret = slices.Clone(cfg.TokenSecret)
	}
	if cfg.JWT != nil {
		v, err := newJWTVerifier(*cfg.JWT, a.now)
		if err != nil {
			return nil, fmt.Errorf("auth: %w", err)
		}
		a.jwt = v
	}
	return a, nil
}

// Authenticate returns who made r. It reads, in this order, the first of:
//
//   - Authorization: Bearer <x>, where x is an API key (wrn_…), a token
//     (wrt_…) or, when JWTs are configured, a JWT. An Authorization header
//     of another scheme is ignored if the next two carry credentials (a
//     proxy in front may use it), and refused otherwise;
//   - X-API-Key: <API key>;
//   - the query parameter token=<token>. URLs end up in logs, so they may
//     carry tokens, which expire in minutes, never API keys: a key there
//     fails the request whatever else it carries.
//
// The first credential found decides: a bad one fails the request even if
// a later one is good. Every credential failure is ErrUnauthenticated; a
// failing key store or JWKS keeps its own class.
func (a *Authenticator) Authenticate(ctx context.Context, r *http.Request) (*Identity, error) {
	authz := r.Header.Values("Authorization")
	apiKey := r.Header.Values("X-API-Key")
	query := r.URL.Query()["token"]
	if len(authz) > 1 || len(apiKey) > 1 || len(query) > 1 {
		return nil, unauthenticated("malformed credentials: more than one Authorization header, X-API-Key header or token parameter")
	}
	// A key in a URL is refused even beside good credentials: clients
	// must learn not to put it there.
	if len(query) == 1 && strings.HasPrefix(query[0], KeyPrefix) {
		return nil, unauthenticated("API keys are not accepted in URLs, where logs keep them: " +
			"send the key in the Authorization or X-API-Key header, and consider this one leaked")
	}

	if len(authz) == 1 {
		scheme, cred, _ := strings.Cut(strings.TrimSpace(authz[0]), " ")
		if strings.EqualFold(scheme, "Bearer") {
			return a.bearer(ctx, strings.TrimSpace(cred))
		}
		if len(apiKey) == 0 && len(query) == 0 {
			return nil, unauthenticated("unsupported Authorization scheme: use Authorization: Bearer <API key or token>")
		}
	}
	if len(apiKey) == 1 {
		key := strings.TrimSpace(apiKey[0])
		if !strings.HasPrefix(key, KeyPrefix) {
			return nil, unauthenticated("malformed API key in X-API-Key: want %s<id>_<secret>", KeyPrefix)
		}
		return a.verifyKey(ctx, key)
	}
	if len(query) == 1 {
		if !strings.HasPrefix(query[0], TokenPrefix) {
			return nil, unauthenticated("malformed token parameter: want a %s… token", TokenPrefix)
		}
		return a.verifyTokenIdentity(ctx, query[0])
	}
	return nil, unauthenticated("missing credentials: send Authorization: Bearer <API key or token>, or X-API-Key: <API key>")
}

// bearer authenticates the credential of an Authorization: Bearer header.
func (a *Authenticator) bearer(ctx context.Context, cred string) (*Identity, error) {
	switch {
	case cred == "":
		return nil, unauthenticated("malformed credentials: empty bearer credential")
	case len(cred) > maxCredentialLen:
		return nil, unauthenticated("malformed credentials: longer than %d bytes", maxCredentialLen)
	case strings.HasPrefix(cred, KeyPrefix):
		return a.verifyKey(ctx, cred)
	case strings.HasPrefix(cred, TokenPrefix):
		return a.verifyTokenIdentity(ctx, cred)
	case a.jwt != nil:
		return a.jwt.verify(ctx, cred)
	}
	return nil, unauthenticated("malformed credentials: want an API key (%s…) or a token (%s…)", KeyPrefix, TokenPrefix)
}

// errInvalidKey is the one answer for an unknown key id and a wrong
// secret, so that the answer does not say which ids exist.
func errInvalidKey() error { return unauthenticated("invalid API key") }

// verifyKey checks an API key. It hashes and compares the secret whether
// or not the id exists, and says a key is revoked or expired only to a
// caller who knows its secret.
func (a *Authenticator) verifyKey(ctx context.Context, key string) (*Identity, error) {
	id, secret, ok := ParseKey(key)
	if !ok {
		return nil, unauthenticated("malformed API key: want %s<%d characters>_<%d characters> of a-z and 2-7", KeyPrefix, KeyIDLen, KeySecretLen)
	}
	k, stored, err := a.lookupKey(ctx, id)
	switch {
	case errdefs.Is(err, errdefs.ErrNotFound):
		k, stored = nil, a.dummyHash
		if a.testHookDummy != nil {
			a.testHookDummy()
		}
	case err != nil:
		return nil, fmt.Errorf("check API key %s: %w", id, err)
	}
	match := subtle.ConstantTimeCompare(HashSecret(secret), stored) == 1
	if !match || k == nil {
		return nil, errInvalidKey()
	}
	if err := a.checkKeyUsable(k, "API key"); err != nil {
		return nil, err
	}
	return &Identity{Tenant: k.Tenant, KeyID: k.ID, Admin: k.Admin, Method: MethodKey}, nil
}

// checkKeyUsable fails for a revoked or expired key. what names the
// credential in the message.
func (a *Authenticator) checkKeyUsable(k *Key, what string) error {
	if k.RevokedAt != nil {
		return unauthenticated("%s: key %s was revoked at %s", what, k.ID, k.RevokedAt.UTC().Format(time.RFC3339))
	}
	if k.ExpiresAt != nil && !a.now().Before(*k.ExpiresAt) {
		return unauthenticated("%s: key %s expired at %s", what, k.ID, k.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// verifyTokenIdentity checks a token and, if it was issued for an API key,
// that the key still works.
func (a *Authenticator) verifyTokenIdentity(ctx context.Context, tok string) (*Identity, error) {
	if len(tok) > maxCredentialLen {
		return nil, unauthenticated("malformed token")
	}
	p, err := a.verifyToken(tok)
	if err != nil {
		return nil, err
	}
	id := &Identity{Tenant: p.Tenant, KeyID: p.KeyID, Subject: p.Subject, Admin: p.Admin, Method: MethodToken}
	if p.KeyID == "" {
		return id, nil
	}
	k, _, err := a.lookupKey(ctx, p.KeyID)
	if errdefs.Is(err, errdefs.ErrNotFound) {
		return nil, unauthenticated("token: its API key %s no longer exists", p.KeyID)
	}
	if err != nil {
		return nil, fmt.Errorf("check the API key %s of a token: %w", p.KeyID, err)
	}
	if k.Tenant != p.Tenant {
		return nil, unauthenticated("malformed token")
	}
	if err := a.checkKeyUsable(k, "token"); err != nil {
		return nil, err
	}
	id.Admin = id.Admin && k.Admin
	return id, nil
}

// CreateKey makes an API key for tenant and stores it. It returns the key
// to show its owner, once, and its record. expires, if not nil, must be in
// the future.
func (a *Authenticator) CreateKey(ctx context.Context, tenant, name string, admin bool, expires *time.Time) (string, *Key, error) {
	for attempt := 0; ; attempt++ {
		plaintext, k, hash, err := generateKey(a.now(), tenant, name, admin, expires)
		if err != nil {
			return "", nil, err
		}
		err = a.keys.CreateKey(ctx, k, hash)
		// A 60-bit id collides about never; if it does, draw again.
		if errdefs.Is(err, errdefs.ErrConflict) && attempt < 2 {
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("create API key for tenant %q: %w", tenant, err)
		}
		return plaintext, k, nil
	}
}

// RevokeKey revokes the API key id, which must belong to tenant unless
// tenant is "" (an administrator's call). A key of another tenant is
// ErrNotFound, like a missing one. Revoking also refuses the tokens issued
// for the key.
func (a *Authenticator) RevokeKey(ctx context.Context, tenant, id string) error {
	k, _, err := a.keys.GetKey(ctx, id)
	if err != nil {
		return fmt.Errorf("revoke API key: %w", err)
	}
	if tenant != "" && k.Tenant != tenant {
		return errdefs.New(errdefs.ErrNotFound, "API key %q not found", id)
	}
	err = a.keys.RevokeKey(ctx, id, a.now())
	// Dropped even if the store failed: it may have written.
	a.cache.forget(id)
	if err != nil {
		return fmt.Errorf("revoke API key: %w", err)
	}
	return nil
}

// ListKeys returns the tenant's API keys, or every tenant's for tenant "",
// ordered by creation time.
func (a *Authenticator) ListKeys(ctx context.Context, tenant string) ([]*Key, error) {
	ks, err := a.keys.ListKeys(ctx, tenant)
	if err != nil {
		return nil, fmt.Errorf("list API keys: %w", err)
	}
	return ks, nil
}
