package auth

import (
	"crypto/sha256"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/errdefs"
)

func TestGenerateKeyFormat(t *testing.T) {
	expires := time.Now().Add(time.Hour)
	plaintext, k, hash, err := GenerateKey("acme", "ci", true, &expires)
	if err != nil {
		t.Fatalf("GenerateKey() = %v, want nil", err)
	}
	if len(plaintext) != 49 || !strings.HasPrefix(plaintext, "wrn_") || plaintext[16] != '_' {
		t.Errorf("GenerateKey() plaintext = %q, want wrn_ + 12 characters + _ + 32 characters", plaintext)
	}
	id, secret, ok := ParseKey(plaintext)
	if !ok {
		t.Fatalf("ParseKey(%q) = _, _, false, want true", plaintext)
	}
	if id != k.ID {
		t.Errorf("ParseKey(%q) id = %q, want the record's id %q", plaintext, id, k.ID)
	}
	sum := sha256.Sum256([]byte(secret))
	if diff := cmp.Diff(sum[:], hash); diff != "" {
		t.Errorf("GenerateKey() hash is not the SHA-256 of the secret (-want +got):\n%s", diff)
	}
	if strings.Contains(string(hash), secret) {
		t.Errorf("GenerateKey() hash contains the secret")
	}
	want := &Key{ID: id, Tenant: "acme", Name: "ci", Admin: true, CreatedAt: k.CreatedAt, ExpiresAt: &expires}
	if diff := cmp.Diff(want, k, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("GenerateKey() record mismatch (-want +got):\n%s", diff)
	}
	if k.ExpiresAt == &expires {
		t.Errorf("GenerateKey() record aliases the caller's expiry")
	}

	// Fresh randomness each time: no two of many keys share an id or secret.
	seen := map[string]bool{}
	for range 1000 {
		p, _, _, err := GenerateKey("acme", "", false, nil)
		if err != nil {
			t.Fatalf("GenerateKey() = %v, want nil", err)
		}
		id, secret, _ := ParseKey(p)
		if seen[id] || seen[secret] {
			t.Fatalf("GenerateKey() repeated an id or secret: %q", p)
		}
		seen[id], seen[secret] = true, true
	}
}

func TestParseKey(t *testing.T) {
	const (
		id     = "abcdefgh2345"
		secret = "abcdefghijklmnopqrstuvwxyz234567"
	)
	tests := []struct {
		name   string
		in     string
		wantOK bool
	}{
		{"valid", "wrn_" + id + "_" + secret, true},
		{"empty", "", false},
		{"prefix only", "wrn_", false},
		{"token prefix", "wrt_" + id + "_" + secret, false},
		{"upper case prefix", "WRN_" + id + "_" + secret, false},
		{"upper case id", "wrn_ABCDEFGH2345_" + secret, false},
		{"upper case secret", "wrn_" + id + "_" + strings.ToUpper(secret), false},
		{"digit 1 is not base32", "wrn_abcdefgh2341_" + secret, false},
		{"digit 8 is not base32", "wrn_" + id + "_abcdefghijklmnopqrstuvwxyz234568", false},
		{"padding", "wrn_" + id + "_abcdefghijklmnopqrstuvwxyz23456=", false},
		{"short id", "wrn_abcdefgh234_" + secret + "a", false},
		{"long id", "wrn_abcdefgh23456_" + secret[1:], false},
		{"short secret", "wrn_" + id + "_" + secret[1:], false},
		{"long secret", "wrn_" + id + "_" + secret + "a", false},
		{"other separator", "wrn_" + id + "-" + secret, false},
		{"trailing newline", "wrn_" + id + "_" + secret[1:] + "\n", false},
		{"leading space", " wrn_" + id + "_" + secret[1:], false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gotID, gotSecret, ok := ParseKey(tc.in)
			if ok != tc.wantOK {
				t.Fatalf("ParseKey(%q) ok = %t, want %t", tc.in, ok, tc.wantOK)
			}
			if ok && (gotID != id || gotSecret != secret) {
				t.Errorf("ParseKey(%q) = %q, %q, want %q, %q", tc.in, gotID, gotSecret, id, secret)
			}
			if !ok && (gotID != "" || gotSecret != "") {
				t.Errorf("ParseKey(%q) = %q, %q, false, want empty strings", tc.in, gotID, gotSecret)
			}
		})
	}
}

func TestValidTenant(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"acme", true},
		{"a", true},
		{"0", true},
		{"team-1_x", true},
		{strings.Repeat("a", 63), true},
		{strings.Repeat("a", 64), false},
		{"", false},
		{"-acme", false},
		{"_acme", false},
		{"Acme", false},
		{"ac.me", false},
		{"ac/me", false},
		{"..", false},
		{"acme\n", false},
		{"é", false},
	}
	for _, tc := range tests {
		if got := ValidTenant(tc.name); got != tc.want {
			t.Errorf("ValidTenant(%q) = %t, want %t", tc.name, got, tc.want)
		}
	}
}

func TestGenerateKeyInvalid(t *testing.T) {
	past := time.Now().Add(-time.Second)
	tests := []struct {
		name, tenant, keyName string
		expires               *time.Time
	}{
		{"bad tenant", "Acme", "", nil},
		{"empty tenant", "", "", nil},
		{"control character in name", "acme", "a\nb", nil},
		{"name not UTF-8", "acme", "\xff", nil},
		{"long name", "acme", strings.Repeat("n", MaxKeyNameLen+1), nil},
		{"expiry in the past", "acme", "", &past},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := GenerateKey(tc.tenant, tc.keyName, false, tc.expires)
			if !errdefs.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("GenerateKey(%q, %q) = %v, want %v", tc.tenant, tc.keyName, err, errdefs.ErrInvalidArgument)
			}
		})
	}
}

func TestPolicyAllows(t *testing.T) {
	tests := []struct {
		name    string
		policy  Policy
		program string
		want    bool
	}{
		{"empty policy allows", Policy{}, "curl", true},
		{"denied", Policy{Deny: []string{"curl"}}, "curl", false},
		{"not denied", Policy{Deny: []string{"curl"}}, "ls", true},
		{"allowed", Policy{Allow: []string{"ls", "cat"}}, "cat", true},
		{"not in allow list", Policy{Allow: []string{"ls"}}, "cat", false},
		{"deny wins", Policy{Allow: []string{"curl"}, Deny: []string{"curl"}}, "curl", false},
	}
	for _, tc := range tests {
		if got := tc.policy.Allows(tc.program); got != tc.want {
			t.Errorf("%s: %+v.Allows(%q) = %t, want %t", tc.name, tc.policy, tc.program, got, tc.want)
		}
	}
}

func TestTenantValidate(t *testing.T) {
	good := Tenant{Name: "acme", Quota: Quota{MaxSessions: 3, MaxCPUs: 1.5}, Policy: Policy{Allow: []string{"ls"}}}
	if err := good.Validate(); err != nil {
		t.Errorf("%+v.Validate() = %v, want nil", good, err)
	}
	tests := []struct {
		name   string
		modify func(*Tenant)
	}{
		{"bad name", func(t *Tenant) { t.Name = "ACME" }},
		{"negative sessions", func(t *Tenant) { t.Quota.MaxSessions = -1 }},
		{"negative memory", func(t *Tenant) { t.Quota.MaxMemoryMB = -1 }},
		{"negative lifetime", func(t *Tenant) { t.Quota.MaxLifetime = -time.Second }},
		{"negative exec timeout", func(t *Tenant) { t.Quota.MaxExecTimeout = -time.Second }},
		{"NaN CPUs", func(t *Tenant) { t.Quota.MaxCPUs = math.NaN() }},
		{"infinite CPUs", func(t *Tenant) { t.Quota.MaxCPUs = math.Inf(1) }},
		{"path in allow", func(t *Tenant) { t.Policy.Allow = []string{"/bin/ls"} }},
		{"empty deny entry", func(t *Tenant) { t.Policy.Deny = []string{""} }},
		{"dot-dot", func(t *Tenant) { t.Policy.Deny = []string{".."} }},
		{"NUL", func(t *Tenant) { t.Policy.Deny = []string{"a\x00b"} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tn := good
			tc.modify(&tn)
			if err := tn.Validate(); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("Validate() = %v, want %v", err, errdefs.ErrInvalidArgument)
			}
		})
	}
	var nilTenant *Tenant
	if err := nilTenant.Validate(); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("(*Tenant)(nil).Validate() = %v, want %v", err, errdefs.ErrInvalidArgument)
	}
}
