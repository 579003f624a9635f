package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/errdefs"
)

// Test keys, made once: RSA key generation is slow under -race.
var (
	rsaKey1 = sync.OnceValue(func() *rsa.PrivateKey { return mustRSAKey() })
	rsaKey2 = sync.OnceValue(func() *rsa.PrivateKey { return mustRSAKey() })
	ecKey1  = sync.OnceValue(func() *ecdsa.PrivateKey { return mustECKey() })
	ecKey2  = sync.OnceValue(func() *ecdsa.PrivateKey { return mustECKey() })
)

func mustRSAKey() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
}

func mustECKey() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return k
}

var b64 = base64.RawURLEncoding.EncodeToString

func rsaJWK(kid string, k *rsa.PublicKey) map[string]any {
	return map[string]any{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
		"n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())}
}

func ecJWK(kid string, k *ecdsa.PublicKey) map[string]any {
	point, err := k.Bytes() // 0x04 || x || y
	if err != nil {
		panic(err)
	}
	return map[string]any{"kty": "EC", "kid": kid, "crv": "P-256",
		"x": b64(point[1:33]), "y": b64(point[33:])}
}

func jwksJSON(keys ...map[string]any) []byte {
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		panic(err)
	}
	return b
}

const hsSecret = "0123456789abcdef0123456789abcdef"

// claims are valid claims at clock's time for tenant acme.
func claims(clock *fakeClock) jwt.MapClaims {
	now := clock.Now()
	return jwt.MapClaims{
		"sub":    "alice@example.com",
		"tenant": "acme",
		"iss":    "https://idp.example",
		"aud":    "warren",
		"iat":    now.Unix(),
		"exp":    now.Add(5 * time.Minute).Unix(),
	}
}

// sign signs c with method and key, naming kid in the header if not "".
func sign(t *testing.T, method jwt.SigningMethod, key any, kid string, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("sign %s: %v", method.Alg(), err)
	}
	return s
}

// with returns c with the given claims changed; a nil value deletes one.
func with(c jwt.MapClaims, kv ...any) jwt.MapClaims {
	out := jwt.MapClaims{}
	for k, v := range c {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
		} else {
			out[kv[i].(string)] = kv[i+1]
		}
	}
	return out
}

func TestJWTHS256(t *testing.T) {
	a, _, clock := newAuth(t, Config{JWT: &JWTConfig{
		HS256Secret: []byte(hsSecret),
		AdminClaim:  "warren_admin",
		Audience:    "warren",
		Issuer:      "https://idp.example",
		Leeway:      30 * time.Second,
	}})
	now := clock.Now()
	good := claims(clock)
	hs := func(c jwt.MapClaims) string { return sign(t, jwt.SigningMethodHS256, []byte(hsSecret), "", c) }

	tests := []struct {
		name  string
		token string
		want  *Identity // nil: an error containing msg
		msg   string
	}{
		{"good", hs(good), &Identity{Tenant: "acme", Subject: "alice@example.com", Method: MethodJWT}, ""},
		{"admin", hs(with(good, "warren_admin", true)), &Identity{Tenant: "acme", Subject: "alice@example.com", Admin: true, Method: MethodJWT}, ""},
		{"admin false", hs(with(good, "warren_admin", false)), &Identity{Tenant: "acme", Subject: "alice@example.com", Method: MethodJWT}, ""},
		{"audience in a list", hs(with(good, "aud", []string{"other", "warren"})), &Identity{Tenant: "acme", Subject: "alice@example.com", Method: MethodJWT}, ""},
		{"no sub", hs(with(good, "sub", nil)), &Identity{Tenant: "acme", Method: MethodJWT}, ""},
		{"expired within leeway", hs(with(good, "exp", now.Add(-20*time.Second).Unix())), &Identity{Tenant: "acme", Subject: "alice@example.com", Method: MethodJWT}, ""},
		{"expired", hs(with(good, "exp", now.Add(-time.Minute).Unix())), nil, "JWT expired"},
		{"no exp", hs(with(good, "exp", nil)), nil, "exp claim is required"},
		{"nbf in the future", hs(with(good, "nbf", now.Add(time.Minute).Unix())), nil, "not valid yet"},
		{"nbf within leeway", hs(with(good, "nbf", now.Add(20*time.Second).Unix())), &Identity{Tenant: "acme", Subject: "alice@example.com", Method: MethodJWT}, ""},
		{"wrong audience", hs(with(good, "aud", "other")), nil, `audience is not "warren"`},
		{"no audience", hs(with(good, "aud", nil)), nil, "aud claim is required"},
		{"wrong issuer", hs(with(good, "iss", "https://evil.example")), nil, `issuer is not "https://idp.example"`},
		{"no tenant claim", hs(with(good, "tenant", nil)), nil, `no "tenant" claim`},
		{"invalid tenant name", hs(with(good, "tenant", "../etc")), nil, "not a tenant name"},
		{"tenant not a string", hs(with(good, "tenant", 42)), nil, "not a tenant name"},
		{"admin not a boolean", hs(with(good, "warren_admin", "yes")), nil, `claim "warren_admin" is not a boolean`},
		{"sub not a string", hs(with(good, "sub", 7)), nil, `"sub" is not a string`},
		{"wrong secret", sign(t, jwt.SigningMethodHS256, []byte(strings.Repeat("x", 32)), "", good), nil, "bad signature"},
		{"alg none", sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "", good), nil, `signing algorithm "none" is not accepted`},
		{"HS512", sign(t, jwt.SigningMethodHS512, []byte(hsSecret), "", good), nil, `signing algorithm "HS512" is not accepted`},
		{"RS256 instead", sign(t, jwt.SigningMethodRS256, rsaKey1(), "", good), nil, `signing algorithm "RS256" is not accepted`},
		{"malformed", "not.a.jwt", nil, "malformed JWT"},
		{"two segments", "abc.def", nil, "malformed JWT"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := a.Authenticate(t.Context(), req(nil, bearer(tc.token)))
			if tc.want == nil {
				wantUnauthenticated(t, "Authenticate()", err, tc.msg)
				return
			}
			if err != nil {
				t.Fatalf("Authenticate() = %v, want nil", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Authenticate() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJWTTenantClaim(t *testing.T) {
	a, _, clock := newAuth(t, Config{JWT: &JWTConfig{HS256Secret: []byte(hsSecret), TenantClaim: "https://warren.example/tenant"}})
	tok := sign(t, jwt.SigningMethodHS256, []byte(hsSecret), "",
		with(claims(clock), "tenant", "wrong", "https://warren.example/tenant", "globex"))
	got, err := a.Authenticate(t.Context(), req(nil, bearer(tok)))
	if err != nil || got.Tenant != "globex" {
		t.Errorf("Authenticate() = %+v, %v, want tenant globex", got, err)
	}
	// JWTs are refused in the query string, like API keys (they last).
	_, err = a.Authenticate(t.Context(), req(map[string][]string{"token": {tok}}))
	wantUnauthenticated(t, "Authenticate(JWT in query)", err, "want a wrt_… token")
}

// jwksServer serves a JWKS over HTTP and counts the fetches.
type jwksServer struct {
	*httptest.Server
	fetches atomic.Int32
	mu      sync.Mutex
	body    []byte
	status  int
}

func newJWKSServer(t *testing.T, keys ...map[string]any) *jwksServer {
	s := &jwksServer{body: jwksJSON(keys...), status: http.StatusOK}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		defer s.mu.Unlock()
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.WriteHeader(s.status)
		w.Write(s.body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) set(status int, keys ...map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.body = status, jwksJSON(keys...)
}

func TestJWTJWKSURL(t *testing.T) {
	srv := newJWKSServer(t, rsaJWK("rsa-1", &rsaKey1().PublicKey), ecJWK("ec-1", &ecKey1().PublicKey),
		map[string]any{"kty": "oct", "kid": "hmac", "k": b64([]byte(hsSecret))}) // skipped
	a, _, clock := newAuth(t, Config{JWT: &JWTConfig{JWKSURL: srv.URL, Audience: "warren"}})
	if n := srv.fetches.Load(); n != 0 {
		t.Errorf("New() fetched the JWKS %d times, want 0 (lazy)", n)
	}
	c := claims(clock)
	want := &Identity{Tenant: "acme", Subject: "alice@example.com", Method: MethodJWT}

	pubPEM, err := x509.MarshalPKIXPublicKey(&rsaKey1().PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubPEM})

	tests := []struct {
		name, token string
		ok          bool
		msg         string
	}{
		{"RS256", sign(t, jwt.SigningMethodRS256, rsaKey1(), "rsa-1", c), true, ""},
		{"ES256", sign(t, jwt.SigningMethodES256, ecKey1(), "ec-1", c), true, ""},
		{"RS256 without kid", sign(t, jwt.SigningMethodRS256, rsaKey1(), "", c), true, ""},
		{"ES256 without kid", sign(t, jwt.SigningMethodES256, ecKey1(), "", c), true, ""},
		{"RS256 by another key", sign(t, jwt.SigningMethodRS256, rsaKey2(), "rsa-1", c), false, "bad signature"},
		{"ES256 by another key", sign(t, jwt.SigningMethodES256, ecKey2(), "ec-1", c), false, "bad signature"},
		{"ES256 naming the RSA kid", sign(t, jwt.SigningMethodES256, ecKey1(), "rsa-1", c), false, `no ES256 key with id "rsa-1"`},
		{"alg confusion: HS256 with the PEM public key", sign(t, jwt.SigningMethodHS256, pemBytes, "rsa-1", c), false, `"HS256" is not accepted`},
		{"alg confusion: HS256 with the modulus", sign(t, jwt.SigningMethodHS256, rsaKey1().N.Bytes(), "rsa-1", c), false, `"HS256" is not accepted`},
		{"HS256 with the oct key", sign(t, jwt.SigningMethodHS256, []byte(hsSecret), "hmac", c), false, `"HS256" is not accepted`},
		{"alg none", sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "rsa-1", c), false, `"none" is not accepted`},
		{"PS256", sign(t, jwt.SigningMethodPS256, rsaKey1(), "rsa-1", c), false, `"PS256" is not accepted`},
		{"wrong audience", sign(t, jwt.SigningMethodRS256, rsaKey1(), "rsa-1", with(c, "aud", "x")), false, "audience"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := a.Authenticate(t.Context(), req(nil, bearer(tc.token)))
			if !tc.ok {
				wantUnauthenticated(t, "Authenticate()", err, tc.msg)
				return
			}
			if err != nil {
				t.Fatalf("Authenticate() = %v, want nil", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Authenticate() mismatch (-want +got):\n%s", diff)
			}
		})
	}

	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, c)
	tok.Header["kid"] = 7
	s, err := tok.SignedString(rsaKey1())
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Authenticate(t.Context(), req(nil, bearer(s)))
	wantUnauthenticated(t, "Authenticate(numeric kid)", err, `header "kid" is not a string`)

	// One fetch served all of the above; the unknown kid "rsa-1" for ES256
	// came within a minute of it.
	if n := srv.fetches.Load(); n != 1 {
		t.Errorf("JWKS fetched %d times, want 1", n)
	}
}

func TestJWKSRotation(t *testing.T) {
	srv := newJWKSServer(t, rsaJWK("k1", &rsaKey1().PublicKey))
	a, _, clock := newAuth(t, Config{JWT: &JWTConfig{JWKSURL: srv.URL}})
	auth := func(method jwt.SigningMethod, key any, kid string) error {
		t.Helper()
		_, err := a.Authenticate(t.Context(), req(nil, bearer(sign(t, method, key, kid, claims(clock)))))
		return err
	}
	wantFetches := func(want int32) {
		t.Helper()
		if n := srv.fetches.Load(); n != want {
			t.Errorf("JWKS fetched %d times, want %d", n, want)
		}
	}

	if err := auth(jwt.SigningMethodRS256, rsaKey1(), "k1"); err != nil {
		t.Fatalf("Authenticate(k1) = %v, want nil", err)
	}
	wantFetches(1)

	// The provider rotates: k2 appears beside k1. A token naming k2 makes
	// one refresh, which finds it.
	srv.set(http.StatusOK, rsaJWK("k1", &rsaKey1().PublicKey), ecJWK("k2", &ecKey1().PublicKey))
	clock.Advance(2 * time.Minute)
	if err := auth(jwt.SigningMethodES256, ecKey1(), "k2"); err != nil {
		t.Fatalf("Authenticate(k2 after rotation) = %v, want nil", err)
	}
	wantFetches(2)
	if err := auth(jwt.SigningMethodRS256, rsaKey1(), "k1"); err != nil {
		t.Errorf("Authenticate(k1 after rotation) = %v, want nil", err)
	}
	wantFetches(2)

	// A burst of unknown kids right after a fetch fetches nothing; a burst
	// a minute later fetches once, however many ask at once.
	burst := func() {
		t.Helper()
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				err := auth(jwt.SigningMethodES256, ecKey2(), fmt.Sprintf("unknown-%d", i))
				if !errdefs.Is(err, errdefs.ErrUnauthenticated) || !strings.Contains(err.Error(), "no ES256 key with id") {
					t.Errorf("Authenticate(unknown kid) = %v, want an unknown key error", err)
				}
			})
		}
		wg.Wait()
	}
	burst()
	wantFetches(2)
	clock.Advance(2 * time.Minute)
	burst()
	wantFetches(3)

	// After jwksMaxAge the set is fetched again, and keys the provider
	// dropped stop working.
	srv.set(http.StatusOK, ecJWK("k2", &ecKey1().PublicKey))
	clock.Advance(jwksMaxAge)
	err := auth(jwt.SigningMethodRS256, rsaKey1(), "k1")
	wantUnauthenticated(t, "Authenticate(dropped k1)", err, `no RS256 key with id "k1"`)
	wantFetches(4)
	if err := auth(jwt.SigningMethodES256, ecKey1(), "k2"); err != nil {
		t.Errorf("Authenticate(k2) = %v, want nil", err)
	}
	wantFetches(4)

	// A provider that fails after the max age leaves the old set in use.
	srv.set(http.StatusInternalServerError)
	clock.Advance(jwksMaxAge)
	if err := auth(jwt.SigningMethodES256, ecKey1(), "k2"); err != nil {
		t.Errorf("Authenticate(k2) while the provider fails = %v, want nil (the old set)", err)
	}
	wantFetches(5)
}

func TestJWKSUnavailable(t *testing.T) {
	srv := newJWKSServer(t)
	srv.set(http.StatusServiceUnavailable)
	a, _, clock := newAuth(t, Config{JWT: &JWTConfig{JWKSURL: srv.URL}})
	tok := sign(t, jwt.SigningMethodRS256, rsaKey1(), "k1", claims(clock))
	for range 3 {
		_, err := a.Authenticate(t.Context(), req(nil, bearer(tok)))
		if !errdefs.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "503") {
			t.Errorf("Authenticate() with the JWKS down = %v, want %v naming the 503", err, errdefs.ErrUnavailable)
		}
	}
	if n := srv.fetches.Load(); n != 1 {
		t.Errorf("JWKS fetched %d times while down, want 1 (once a minute)", n)
	}
	srv.set(http.StatusOK, rsaJWK("k1", &rsaKey1().PublicKey))
	clock.Advance(jwksMinRefresh)
	tok = sign(t, jwt.SigningMethodRS256, rsaKey1(), "k1", claims(clock))
	if _, err := a.Authenticate(t.Context(), req(nil, bearer(tok))); err != nil {
		t.Errorf("Authenticate() once the JWKS is back = %v, want nil", err)
	}
}

func TestJWKSFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "jwks.json")
	write := func(keys ...map[string]any) {
		t.Helper()
		// Replace atomically, as a careful operator (or a config tool) does.
		tmp := filepath.Join(dir, "jwks.json.tmp")
		if err := os.WriteFile(tmp, jwksJSON(keys...), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(rsaJWK("k1", &rsaKey1().PublicKey))
	a, _, clock := newAuth(t, Config{JWT: &JWTConfig{JWKSFile: path}})
	auth := func(method jwt.SigningMethod, key any, kid string) error {
		t.Helper()
		_, err := a.Authenticate(t.Context(), req(nil, bearer(sign(t, method, key, kid, claims(clock)))))
		return err
	}

	if err := auth(jwt.SigningMethodRS256, rsaKey1(), "k1"); err != nil {
		t.Fatalf("Authenticate(k1) = %v, want nil", err)
	}
	err := auth(jwt.SigningMethodES256, ecKey1(), "k2")
	wantUnauthenticated(t, "Authenticate(k2 before rotation)", err, `no ES256 key with id "k2"`)

	// Rotation: k2 replaces k1 in the file; no rate limit applies.
	write(ecJWK("k2", &ecKey1().PublicKey))
	if err := auth(jwt.SigningMethodES256, ecKey1(), "k2"); err != nil {
		t.Errorf("Authenticate(k2 after rotation) = %v, want nil", err)
	}
	err = auth(jwt.SigningMethodRS256, rsaKey1(), "k1")
	wantUnauthenticated(t, "Authenticate(k1 after removal)", err, `no RS256 key with id "k1"`)

	// A broken file keeps the last good set.
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := auth(jwt.SigningMethodES256, ecKey1(), "k2"); err != nil {
		t.Errorf("Authenticate(k2) with a broken file = %v, want nil (the last good set)", err)
	}

	// A broken file at start is a configuration error.
	if _, err := New(Config{Keys: newFakeKeys(), JWT: &JWTConfig{JWKSFile: path}}); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("New(broken JWKS file) = %v, want %v", err, errdefs.ErrInvalidArgument)
	}
}

func TestParseJWKS(t *testing.T) {
	rsaPub, ecPub := &rsaKey1().PublicKey, &ecKey1().PublicKey
	mod := func(k map[string]any, kv ...any) map[string]any {
		out := map[string]any{}
		for key, v := range k {
			out[key] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(out, kv[i].(string))
			} else {
				out[kv[i].(string)] = kv[i+1]
			}
		}
		return out
	}
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	offCurve := mod(ecJWK("e", ecPub), "y", b64(make([]byte, 32)))

	tests := []struct {
		name     string
		keys     []map[string]any
		wantKids []string // the usable keys, or nil for an error
	}{
		{"RSA and EC", []map[string]any{rsaJWK("r", rsaPub), ecJWK("e", ecPub)}, []string{"r", "e"}},
		{"no alg or use", []map[string]any{mod(rsaJWK("r", rsaPub), "alg", nil, "use", nil)}, []string{"r"}},
		{"padded base64", []map[string]any{mod(rsaJWK("r", rsaPub), "e", "AQAB==")}, []string{"r"}},
		{"encryption key skipped", []map[string]any{mod(rsaJWK("enc", rsaPub), "use", "enc"), ecJWK("e", ecPub)}, []string{"e"}},
		{"key_ops without verify skipped", []map[string]any{mod(rsaJWK("x", rsaPub), "key_ops", []string{"encrypt"}), ecJWK("e", ecPub)}, []string{"e"}},
		{"RS512 key skipped", []map[string]any{mod(rsaJWK("r5", rsaPub), "alg", "RS512"), ecJWK("e", ecPub)}, []string{"e"}},
		{"P-384 skipped", []map[string]any{mod(ecJWK("p384", ecPub), "crv", "P-384"), rsaJWK("r", rsaPub)}, []string{"r"}},
		{"OKP skipped", []map[string]any{{"kty": "OKP", "crv": "Ed25519", "x": "abc"}, rsaJWK("r", rsaPub)}, []string{"r"}},
		{"only skipped keys", []map[string]any{mod(rsaJWK("enc", rsaPub), "use", "enc")}, nil},
		{"empty", nil, nil},
		{"RSA 1024 bits", []map[string]any{rsaJWK("small", &small.PublicKey)}, nil},
		{"RSA even exponent", []map[string]any{mod(rsaJWK("r", rsaPub), "e", b64([]byte{1, 0, 0}))}, nil},
		{"RSA exponent 1", []map[string]any{mod(rsaJWK("r", rsaPub), "e", b64([]byte{1}))}, nil},
		{"RSA without n", []map[string]any{mod(rsaJWK("r", rsaPub), "n", nil)}, nil},
		{"RSA bad base64", []map[string]any{mod(rsaJWK("r", rsaPub), "n", "!!!")}, nil},
		{"EC off the curve", []map[string]any{offCurve}, nil},
		{"EC short coordinate", []map[string]any{mod(ecJWK("e", ecPub), "x", b64(make([]byte, 31)))}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			keys, err := parseJWKS(jwksJSON(tc.keys...))
			if tc.wantKids == nil {
				if err == nil {
					t.Errorf("parseJWKS() = %d keys, nil, want an error", len(keys))
				}
				return
			}
			if err != nil {
				t.Fatalf("parseJWKS() = %v, want nil", err)
			}
			var kids []string
			for _, k := range keys {
				kids = append(kids, k.kid)
			}
			if diff := cmp.Diff(tc.wantKids, kids); diff != "" {
				t.Errorf("parseJWKS() kids mismatch (-want +got):\n%s", diff)
			}
		})
	}
	for _, doc := range []string{"", "[]", `{"keys": 3}`, "{not json"} {
		if _, err := parseJWKS([]byte(doc)); err == nil {
			t.Errorf("parseJWKS(%q) = nil error, want one", doc)
		}
	}
}
