package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// Token format: TokenPrefix, the base64url (unpadded) JSON payload, '.',
// the base64url HMAC-SHA256 of everything before the '.'.
const (
	TokenPrefix = "wrt_"

	// MaxTokenTTL is the longest a token lives.
	MaxTokenTTL = 10 * time.Minute
)

// tokenPayload is what a token carries: an Identity, without its Method,
// and an expiry. The short names keep tokens short in URLs.
type tokenPayload struct {
	Tenant  string `json:"t"`
	KeyID   string `json:"k,omitempty"`
	Subject string `json:"s,omitempty"`
	Admin   bool   `json:"a,omitempty"`
	Expires int64  `json:"e"` // Unix seconds
}

// IssueToken returns a token for id that expires after ttl (MaxTokenTTL if
// ttl is not positive or is longer), and when it expires. id is an
// Identity that Authenticate returned; the token authenticates as the same
// tenant, key and subject, with Method "token". A token issued for an API
// key dies with the key: revoking the key refuses its tokens.
func (a *Authenticator) IssueToken(id *Identity, ttl time.Duration) (token string, expires time.Time) {
	if ttl <= 0 || ttl > MaxTokenTTL {
		ttl = MaxTokenTTL
	}
	// Whole seconds, rounded down: the token never outlives ttl.
	expires = time.Unix(a.now().Add(ttl).Unix(), 0).UTC()
	payload, err := json.Marshal(tokenPayload{
		Tenant:  id.Tenant,
		KeyID:   id.KeyID,
		Subject: id.Subject,
		Admin:   id.Admin,
		Expires: expires.Unix(),
	})
	if err != nil {
		panic("auth: marshal token payload: " + err.Error()) // strings, a bool and an int
	}
	signed := TokenPrefix + base64.RawURLEncoding.EncodeToString(payload)
	return signed + "." + base64.RawURLEncoding.EncodeToString(a.tokenMAC(signed)), expires
}

// tokenMAC signs the token text before its '.'.
func (a *Authenticator) tokenMAC(signed string) []byte {
	m := hmac.New(sha256.New, a.tokenSecret)
	m.Write([]byte(signed))
	return m.Sum(nil)
}

// verifyToken checks a token's signature and expiry and returns what it
// carries. The caller checks the key behind it.
func (a *Authenticator) verifyToken(tok string) (*tokenPayload, error) {
	signed, mac64, ok := cutLast(tok, ".")
	if !ok || !strings.HasPrefix(signed, TokenPrefix) {
		return nil, unauthenticated("malformed token")
	}
	mac, err := base64.RawURLEncoding.DecodeString(mac64)
	if err != nil || len(mac) != sha256.Size {
		return nil, unauthenticated("malformed token")
	}
	if !hmac.Equal(mac, a.tokenMAC(signed)) {
		return nil, unauthenticated("invalid token: bad signature (tokens do not survive a daemon restart)")
	}
	// Signed by us: what follows cannot fail for a token we issued, but
	// stays careful anyway.
	raw, err := base64.RawURLEncoding.DecodeString(signed[len(TokenPrefix):])
	if err != nil {
		return nil, unauthenticated("malformed token")
	}
	var p tokenPayload
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil || !ValidTenant(p.Tenant) || (p.KeyID != "" && !ValidKeyID(p.KeyID)) {
		return nil, unauthenticated("malformed token")
	}
	if !a.now().Before(time.Unix(p.Expires, 0)) {
		return nil, unauthenticated("token expired at %s; ask for a new one", time.Unix(p.Expires, 0).UTC().Format(time.RFC3339))
	}
	return &p, nil
}

// cutLast slices s around the last instance of sep.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// unauthenticated is a credential failure.
func unauthenticated(format string, args ...any) error {
	return errdefs.New(errdefs.ErrUnauthenticated, format, args...)
}
