package auth

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/warrenhq/warren/internal/errdefs"
)

// JWTConfig accepts JWTs from an operator's identity provider. Exactly one
// key source is set: HS256Secret, JWKSURL or JWKSFile.
type JWTConfig struct {
	// HS256Secret verifies HS256 tokens; at least 32 bytes.
	HS256Secret []byte
	// JWKSURL is an http(s) URL serving a JWKS whose RSA and P-256 keys
	// verify RS256 and ES256 tokens. It is fetched when first needed.
	JWKSURL string
	// JWKSFile is a file holding such a JWKS, read by New and again when
	// it changes.
	JWKSFile string
	// TenantClaim names the claim that holds the caller's tenant, a
	// ValidTenant; "tenant" if empty.
	TenantClaim string
	// AdminClaim, if set, names a boolean claim that makes the caller an
	// administrator when true.
	AdminClaim string
	// Audience, if set, must be in the token's aud.
	Audience string
	// Issuer, if set, must be the token's iss.
	Issuer string
	// Leeway is the clock skew allowed on exp and nbf.
	Leeway time.Duration
}

// jwtVerifier checks JWTs against a JWTConfig.
type jwtVerifier struct {
	cfg     JWTConfig // defaults applied
	methods []string  // the algorithms the key source can verify
	opts    []jwt.ParserOption
	jwks    *jwks // nil for HS256
}

func newJWTVerifier(cfg JWTConfig, now func() time.Time) (*jwtVerifier, error) {
	sources := 0
	for _, set := range []bool{cfg.HS256Secret != nil, cfg.JWKSURL != "", cfg.JWKSFile != ""} {
		if set {
			sources++
		}
	}
	if sources != 1 {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "JWT: set exactly one of HS256Secret, JWKSURL and JWKSFile")
	}
	if cfg.TenantClaim == "" {
		cfg.TenantClaim = "tenant"
	}
	if cfg.Leeway < 0 {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "JWT: negative leeway %s", cfg.Leeway)
	}
	v := &jwtVerifier{cfg: cfg}
	switch {
	case cfg.HS256Secret != nil:
		// RFC 7518 section 3.2: a key at least as long as the hash.
		if len(cfg.HS256Secret) < 32 {
			return nil, errdefs.New(errdefs.ErrInvalidArgument, "JWT: HS256 secret of %d bytes, want at least 32", len(cfg.HS256Secret))
		}
		v.cfg.HS256Secret = slices.Clone(cfg.HS256Secret)
		v.methods = []string{"HS256"}
	case cfg.JWKSURL != "":
		u, err := url.Parse(cfg.JWKSURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, errdefs.New(errdefs.ErrInvalidArgument, "JWT: JWKS URL %q is not an http(s) URL", cfg.JWKSURL)
		}
		v.jwks = newJWKSURL(cfg.JWKSURL, now)
		v.methods = []string{"RS256", "ES256"}
	default:
		j, err := newJWKSFile(cfg.JWKSFile, now)
		if err != nil {
			return nil, errdefs.New(errdefs.ErrInvalidArgument, "JWT: %w", err)
		}
		v.jwks = j
		v.methods = []string{"RS256", "ES256"}
	}
	// The methods restriction is what stops algorithm confusion: with a
	// JWKS no HS256 token is looked at, so an RSA public key can never be
	// used as an HMAC secret; "none" is never accepted.
	v.opts = []jwt.ParserOption{
		jwt.WithValidMethods(v.methods),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(cfg.Leeway),
		jwt.WithTimeFunc(now),
	}
	if cfg.Audience != "" {
		v.opts = append(v.opts, jwt.WithAudience(cfg.Audience))
	}
	if cfg.Issuer != "" {
		v.opts = append(v.opts, jwt.WithIssuer(cfg.Issuer))
	}
	return v, nil
}

// verify checks a JWT and returns who it names.
func (v *jwtVerifier) verify(ctx context.Context, raw string) (*Identity, error) {
	var keyErr error // why keyFunc found no key, in our own words
	keyFunc := func(t *jwt.Token) (any, error) {
		key, err := v.key(ctx, t)
		keyErr = err
		return key, err
	}
	claims := jwt.MapClaims{}
	tok, err := jwt.NewParser(v.opts...).ParseWithClaims(raw, claims, keyFunc)
	if err != nil {
		if keyErr != nil {
			return nil, keyErr
		}
		return nil, v.explain(tok, err)
	}

	var tenant string
	switch t := claims[v.cfg.TenantClaim].(type) {
	case nil:
		return nil, unauthenticated("invalid JWT: no %q claim naming the tenant", v.cfg.TenantClaim)
	case string:
		tenant = t
	}
	if !ValidTenant(tenant) {
		return nil, unauthenticated("invalid JWT: claim %q is not a tenant name (%s)", v.cfg.TenantClaim, tenantRule)
	}
	sub, err := claims.GetSubject()
	if err != nil {
		return nil, unauthenticated("invalid JWT: claim \"sub\" is not a string")
	}
	id := &Identity{Tenant: tenant, Subject: sub, Method: MethodJWT}
	if v.cfg.AdminClaim != "" {
		switch a := claims[v.cfg.AdminClaim].(type) {
		case nil:
		case bool:
			id.Admin = a
		default:
			return nil, unauthenticated("invalid JWT: claim %q is not a boolean", v.cfg.AdminClaim)
		}
	}
	return id, nil
}

// key returns the key that verifies t.
func (v *jwtVerifier) key(ctx context.Context, t *jwt.Token) (any, error) {
	alg := t.Method.Alg() // one of v.methods: the parser checked
	if v.jwks == nil {
		return v.cfg.HS256Secret, nil
	}
	kid, ok := t.Header["kid"].(string)
	if _, present := t.Header["kid"]; present && !ok {
		return nil, unauthenticated("malformed JWT: header \"kid\" is not a string")
	}
	keys, err := v.jwks.lookup(ctx, kid, alg)
	if err != nil {
		return nil, err
	}
	if len(keys) == 1 {
		return keys[0], nil
	}
	set := jwt.VerificationKeySet{}
	for _, k := range keys {
		set.Keys = append(set.Keys, k)
	}
	return set, nil
}

// explain turns the parser's error into a message for the caller.
func (v *jwtVerifier) explain(tok *jwt.Token, err error) error {
	if tok != nil && tok.Header != nil {
		if alg, _ := tok.Header["alg"].(string); !slices.Contains(v.methods, alg) {
			return unauthenticated("invalid JWT: signing algorithm %q is not accepted (want %v)", alg, v.methods)
		}
	}
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return unauthenticated("malformed JWT")
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return unauthenticated("invalid JWT: bad signature")
	case errors.Is(err, jwt.ErrTokenExpired):
		return unauthenticated("JWT expired")
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return unauthenticated("invalid JWT: not valid yet (nbf)")
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return unauthenticated("invalid JWT: audience is not %q", v.cfg.Audience)
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return unauthenticated("invalid JWT: issuer is not %q", v.cfg.Issuer)
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return unauthenticated("invalid JWT: %v", err) // names the claim: exp, or aud or iss when configured
	case errors.Is(err, jwt.ErrInvalidType):
		return unauthenticated("invalid JWT: a registered claim has the wrong type")
	}
	return unauthenticated("invalid JWT")
}
