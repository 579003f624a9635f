package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/warrenhq/warren/internal/errdefs"
)

// API key format: KeyPrefix, KeyIDLen characters of id, '_', KeySecretLen
// characters of secret, all from the lowercase base32 alphabet (RFC 4648
// section 6, lowercased, no padding).
const (
	KeyPrefix    = "wrn_"
	KeyIDLen     = 12 // 60 bits: unique, not secret
	KeySecretLen = 32 // 160 bits
	keyLen       = len(KeyPrefix) + KeyIDLen + 1 + KeySecretLen

	// MaxKeyNameLen bounds a key's name, in bytes.
	MaxKeyNameLen = 128
)

// base32Alphabet is RFC 4648's base32 alphabet in lower case. 32 divides
// 256, so a random byte masked to its low five bits picks a character
// uniformly.
const base32Alphabet = "abcdefghijklmnopqrstuvwxyz234567"

// Key is an API key's public record: everything but its secret.
type Key struct {
	// ID is the key's public id: in listings and audit logs (immutable).
	ID string
	// Tenant is the tenant the key acts for (immutable).
	Tenant string
	// Name is a label for people, maybe empty (immutable).
	Name string
	// Admin keys may manage every tenant (immutable).
	Admin     bool
	CreatedAt time.Time
	// ExpiresAt is when the key stops working, nil for never.
	ExpiresAt *time.Time
	// RevokedAt is when the key was revoked, nil while it is not.
	RevokedAt *time.Time
}

// tenantPattern is the rule for tenant names: they appear in paths, cgroup
// names and log lines, so they are short and plain.
var tenantPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

const tenantRule = "want 1 to 63 of a-z, 0-9, '_' and '-', starting with a letter or digit"

// ValidTenant reports whether name is a valid tenant name:
// ^[a-z0-9][a-z0-9_-]{0,62}$.
func ValidTenant(name string) bool { return tenantPattern.MatchString(name) }

// GenerateKey makes a new API key from crypto/rand. It returns the key as
// the caller shows it, once (plaintext), its record, and the SHA-256 of its
// secret, which is what a KeyStore keeps. expires, if not nil, must be in
// the future. Nothing is stored: see Authenticator.CreateKey.
func GenerateKey(tenant, name string, admin bool, expires *time.Time) (plaintext string, k *Key, hash []byte, err error) {
	return generateKey(time.Now(), tenant, name, admin, expires)
}

func generateKey(now time.Time, tenant, name string, admin bool, expires *time.Time) (string, *Key, []byte, error) {
	if !ValidTenant(tenant) {
		return "", nil, nil, errdefs.New(errdefs.ErrInvalidArgument, "tenant name %q: %s", tenant, tenantRule)
	}
	if err := validKeyName(name); err != nil {
		return "", nil, nil, err
	}
	if expires != nil && !expires.After(now) {
		return "", nil, nil, errdefs.New(errdefs.ErrInvalidArgument,
			"key expiry %s is not in the future", expires.UTC().Format(time.RFC3339))
	}
	id, secret := randomBase32(KeyIDLen), randomBase32(KeySecretLen)
	k := &Key{
		ID:        id,
		Tenant:    tenant,
		Name:      name,
		Admin:     admin,
		CreatedAt: now.UTC(),
	}
	if expires != nil {
		e := expires.UTC()
		k.ExpiresAt = &e
	}
	return KeyPrefix + id + "_" + secret, k, HashSecret(secret), nil
}

// validKeyName accepts names people can read in a listing: UTF-8 without
// control characters, at most MaxKeyNameLen bytes. The empty name is fine.
func validKeyName(name string) error {
	if len(name) > MaxKeyNameLen {
		return errdefs.New(errdefs.ErrInvalidArgument, "key name is %d bytes long, want at most %d", len(name), MaxKeyNameLen)
	}
	if !utf8.ValidString(name) || strings.ContainsFunc(name, unicode.IsControl) {
		return errdefs.New(errdefs.ErrInvalidArgument, "key name %q: want UTF-8 text without control characters", name)
	}
	return nil
}

// randomBase32 returns n random characters of base32Alphabet: 5n bits.
func randomBase32(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (Go 1.24+: it crashes the program instead)
	for i := range b {
		b[i] = base32Alphabet[b[i]&31]
	}
	return string(b)
}

// HashSecret is what a KeyStore keeps of a key's secret: the SHA-256 of
// its 32 characters, as text.
func HashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// ParseKey splits an API key into its id and secret. ok is false unless s
// has exactly the API key format.
func ParseKey(s string) (id, secret string, ok bool) {
	if len(s) != keyLen || !strings.HasPrefix(s, KeyPrefix) {
		return "", "", false
	}
	rest := s[len(KeyPrefix):]
	id, secret = rest[:KeyIDLen], rest[KeyIDLen+1:]
	if rest[KeyIDLen] != '_' || !isBase32(id) || !isBase32(secret) {
		return "", "", false
	}
	return id, secret, true
}

// ValidKeyID reports whether id has the form of an API key's id.
func ValidKeyID(id string) bool { return len(id) == KeyIDLen && isBase32(id) }

func isBase32(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}
