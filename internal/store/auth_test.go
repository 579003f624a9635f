package store

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/errdefs"
)

// newKey makes a key for tenant created at the given time.
func newKey(t *testing.T, tenant string, created time.Time) (string, *auth.Key, []byte) {
	t.Helper()
	plaintext, k, hash, err := auth.GenerateKey(tenant, "key of "+tenant, false, nil)
	if err != nil {
		t.Fatalf("GenerateKey(%q) = %v, want nil", tenant, err)
	}
	k.CreatedAt = created
	return plaintext, k, hash
}

func TestKeys(t *testing.T) {
	s := mustOpen(t, dbPath(t))
	defer mustClose(t, s)
	ctx := t.Context()
	base := time.Date(2026, 5, 6, 7, 8, 9, 123456789, time.UTC)

	if _, _, err := s.GetKey(ctx, "aaaaaaaaaaaa"); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("GetKey(missing) = %v, want %v", err, errdefs.ErrNotFound)
	}
	if err := s.RevokeKey(ctx, "aaaaaaaaaaaa", base); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("RevokeKey(missing) = %v, want %v", err, errdefs.ErrNotFound)
	}
	if n, err := s.CountKeys(ctx); n != 0 || err != nil {
		t.Errorf("CountKeys() on an empty store = %d, %v, want 0, nil", n, err)
	}

	// Created out of order, so that listing must sort.
	_, k2, h2 := newKey(t, "acme", base.Add(2*time.Second))
	_, k1, h1 := newKey(t, "acme", base.Add(time.Second))
	_, k3, h3 := newKey(t, "globex", base.Add(3*time.Second))
	expires := base.Add(24 * time.Hour).In(time.FixedZone("CEST", 2*3600))
	k1.ExpiresAt, k1.Admin = &expires, true
	for _, kh := range []struct {
		k *auth.Key
		h []byte
	}{{k2, h2}, {k1, h1}, {k3, h3}} {
		if err := s.CreateKey(ctx, kh.k, kh.h); err != nil {
			t.Fatalf("CreateKey(%q) = %v, want nil", kh.k.ID, err)
		}
	}
	if err := s.CreateKey(ctx, k1, h1); !errdefs.Is(err, errdefs.ErrConflict) {
		t.Errorf("CreateKey(existing id) = %v, want %v", err, errdefs.ErrConflict)
	}

	got, hash, err := s.GetKey(ctx, k1.ID)
	if err != nil {
		t.Fatalf("GetKey(%q) = %v, want nil", k1.ID, err)
	}
	utcExpires := expires.UTC()
	want := &auth.Key{ID: k1.ID, Tenant: "acme", Name: "key of acme", Admin: true, CreatedAt: base.Add(time.Second), ExpiresAt: &utcExpires}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GetKey(%q) mismatch (-want +got):\n%s", k1.ID, diff)
	}
	if !bytes.Equal(hash, h1) {
		t.Errorf("GetKey(%q) hash = %x, want %x", k1.ID, hash, h1)
	}

	list := func(tenant string) []string {
		t.Helper()
		ks, err := s.ListKeys(ctx, tenant)
		if err != nil {
			t.Fatalf("ListKeys(%q) = %v, want nil", tenant, err)
		}
		var ids []string
		for _, k := range ks {
			ids = append(ids, k.ID)
		}
		return ids
	}
	if diff := cmp.Diff([]string{k1.ID, k2.ID}, list("acme")); diff != "" {
		t.Errorf("ListKeys(acme) mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{k1.ID, k2.ID, k3.ID}, list("")); diff != "" {
		t.Errorf("ListKeys(\"\") mismatch (-want +got):\n%s", diff)
	}
	if ids := list("initech"); ids != nil {
		t.Errorf("ListKeys(initech) = %v, want none", ids)
	}

	revoked := base.Add(time.Hour)
	if err := s.RevokeKey(ctx, k2.ID, revoked); err != nil {
		t.Fatalf("RevokeKey(%q) = %v, want nil", k2.ID, err)
	}
	if err := s.RevokeKey(ctx, k2.ID, revoked.Add(time.Hour)); err != nil {
		t.Fatalf("RevokeKey(%q) again = %v, want nil", k2.ID, err)
	}
	got, _, err = s.GetKey(ctx, k2.ID)
	if err != nil || got.RevokedAt == nil || !got.RevokedAt.Equal(revoked) {
		t.Errorf("GetKey(%q) after two revocations = %+v, %v, want RevokedAt %s (the first)", k2.ID, got, err, revoked)
	}
	if n, err := s.CountKeys(ctx); n != 3 || err != nil {
		t.Errorf("CountKeys() = %d, %v, want 3, nil (revoked keys count)", n, err)
	}
}

func TestCreateKeyInvalid(t *testing.T) {
	s := mustOpen(t, dbPath(t))
	defer mustClose(t, s)
	var zero time.Time
	tests := []struct {
		name   string
		modify func(*auth.Key, *[]byte)
	}{
		{"malformed id", func(k *auth.Key, _ *[]byte) { k.ID = "short" }},
		{"bad tenant", func(k *auth.Key, _ *[]byte) { k.Tenant = "Acme" }},
		{"short hash", func(_ *auth.Key, h *[]byte) { *h = (*h)[:31] }},
		{"no hash", func(_ *auth.Key, h *[]byte) { *h = nil }},
		{"zero expiry pointer", func(k *auth.Key, _ *[]byte) { k.ExpiresAt = &zero }},
		{"created after 2262", func(k *auth.Key, _ *[]byte) { k.CreatedAt = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, k, hash := newKey(t, "acme", time.Now())
			tc.modify(k, &hash)
			if err := s.CreateKey(t.Context(), k, hash); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("CreateKey() = %v, want %v", err, errdefs.ErrInvalidArgument)
			}
		})
	}
	if err := s.CreateKey(t.Context(), nil, nil); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("CreateKey(nil) = %v, want %v", err, errdefs.ErrInvalidArgument)
	}
	if n, _ := s.CountKeys(t.Context()); n != 0 {
		t.Errorf("CountKeys() = %d after refused creates, want 0", n)
	}
}

// TestKeySecretNotStored reads the database directly: the stored hash is
// the SHA-256 of the secret, and neither the secret nor the key appears in
// any column, nor anywhere in the database's files.
func TestKeySecretNotStored(t *testing.T) {
	path := dbPath(t)
	s := mustOpen(t, path)
	defer mustClose(t, s)
	plaintext, k, hash := newKey(t, "acme", time.Now())
	if err := s.CreateKey(t.Context(), k, hash); err != nil {
		t.Fatalf("CreateKey() = %v, want nil", err)
	}
	_, secret, ok := auth.ParseKey(plaintext)
	if !ok {
		t.Fatalf("ParseKey(%q) failed", plaintext)
	}

	var stored []byte
	if err := s.db.QueryRowContext(t.Context(), `SELECT hash FROM api_keys WHERE id = ?`, k.ID).Scan(&stored); err != nil {
		t.Fatalf("SELECT hash: %v", err)
	}
	if sum := sha256.Sum256([]byte(secret)); !bytes.Equal(stored, sum[:]) {
		t.Errorf("stored hash = %x, want SHA-256 of the secret %x", stored, sum)
	}

	rows, err := s.db.QueryContext(t.Context(), `SELECT * FROM api_keys`)
	if err != nil {
		t.Fatalf("SELECT *: %v", err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("scan: %v", err)
		}
		for i, v := range vals {
			text := fmt.Sprint(v)
			if b, ok := v.([]byte); ok {
				text = string(b)
			}
			if strings.Contains(text, secret) || strings.Contains(text, plaintext) {
				t.Errorf("column %s holds the secret: %q", cols[i], text)
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("rows: %v", err)
	}

	for _, p := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // no WAL yet is fine
		}
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s contains the secret", p)
		}
	}
}

func TestTenants(t *testing.T) {
	s := mustOpen(t, dbPath(t))
	defer mustClose(t, s)
	ctx := t.Context()

	if _, err := s.GetTenant(ctx, "acme"); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("GetTenant(missing) = %v, want %v", err, errdefs.ErrNotFound)
	}
	if err := s.DeleteTenant(ctx, "acme"); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("DeleteTenant(missing) = %v, want %v", err, errdefs.ErrNotFound)
	}
	if ts, err := s.ListTenants(ctx); ts != nil || err != nil {
		t.Errorf("ListTenants() on an empty store = %v, %v, want nil, nil", ts, err)
	}

	acme := &auth.Tenant{
		Name: "acme",
		Quota: auth.Quota{
			MaxSessions:    7,
			MaxMemoryMB:    4096,
			MaxCPUs:        2.75,
			MaxLifetime:    36*time.Hour + time.Nanosecond,
			MaxExecTimeout: 90 * time.Second,
		},
		Policy: auth.Policy{
			Allow: []string{"python3", "ls", "git"},
			Deny:  []string{"curl", "wget"},
		},
		UpdatedAt: time.Date(2026, 5, 6, 7, 8, 9, 987654321, time.UTC),
	}
	globex := &auth.Tenant{Name: "globex"} // every field at its default
	for _, tn := range []*auth.Tenant{globex, acme} {
		if err := s.PutTenant(ctx, tn); err != nil {
			t.Fatalf("PutTenant(%q) = %v, want nil", tn.Name, err)
		}
	}
	for _, want := range []*auth.Tenant{acme, globex} {
		got, err := s.GetTenant(ctx, want.Name)
		if err != nil {
			t.Fatalf("GetTenant(%q) = %v, want nil", want.Name, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GetTenant(%q) mismatch (-want +got):\n%s", want.Name, diff)
		}
	}

	// Replace: every field is overwritten; empty lists read back nil.
	acme2 := &auth.Tenant{Name: "acme", Quota: auth.Quota{MaxSessions: 1}, Policy: auth.Policy{Allow: []string{}, Deny: []string{"rm"}},
		UpdatedAt: acme.UpdatedAt.Add(time.Hour)}
	if err := s.PutTenant(ctx, acme2); err != nil {
		t.Fatalf("PutTenant(acme again) = %v, want nil", err)
	}
	got, err := s.GetTenant(ctx, "acme")
	want := &auth.Tenant{Name: "acme", Quota: auth.Quota{MaxSessions: 1}, Policy: auth.Policy{Deny: []string{"rm"}}, UpdatedAt: acme2.UpdatedAt}
	if err != nil {
		t.Fatalf("GetTenant(acme) = %v, want nil", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GetTenant(acme) after replace mismatch (-want +got):\n%s", diff)
	}

	ts, err := s.ListTenants(ctx)
	if err != nil {
		t.Fatalf("ListTenants() = %v, want nil", err)
	}
	if diff := cmp.Diff([]*auth.Tenant{want, globex}, ts); diff != "" {
		t.Errorf("ListTenants() mismatch (-want +got):\n%s", diff)
	}

	if err := s.DeleteTenant(ctx, "acme"); err != nil {
		t.Fatalf("DeleteTenant(acme) = %v, want nil", err)
	}
	if _, err := s.GetTenant(ctx, "acme"); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("GetTenant(deleted) = %v, want %v", err, errdefs.ErrNotFound)
	}

	for _, bad := range []*auth.Tenant{
		nil,
		{Name: "Not Valid"},
		{Name: "acme", Quota: auth.Quota{MaxSessions: -1}},
		{Name: "acme", Policy: auth.Policy{Deny: []string{"/usr/bin/curl"}}},
		{Name: "acme", UpdatedAt: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		if err := s.PutTenant(ctx, bad); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("PutTenant(%+v) = %v, want %v", bad, err, errdefs.ErrInvalidArgument)
		}
	}
}

// TestAuthenticatorOverSQLite runs keys through auth.Authenticator with
// this store underneath, across a reopen.
func TestAuthenticatorOverSQLite(t *testing.T) {
	path := dbPath(t)
	s := mustOpen(t, path)
	a, err := auth.New(auth.Config{Keys: s})
	if err != nil {
		t.Fatalf("auth.New() = %v, want nil", err)
	}
	plaintext, k, err := a.CreateKey(t.Context(), "acme", "ci", true, nil)
	if err != nil {
		t.Fatalf("CreateKey() = %v, want nil", err)
	}
	other, ok := strings.CutPrefix(plaintext, auth.KeyPrefix+k.ID+"_")
	if !ok {
		t.Fatalf("CreateKey() = %q, not of key %s", plaintext, k.ID)
	}
	mustClose(t, s)

	s = mustOpen(t, path)
	defer mustClose(t, s)
	a, err = auth.New(auth.Config{Keys: s})
	if err != nil {
		t.Fatalf("auth.New() = %v, want nil", err)
	}
	authenticate := func(key string) (*auth.Identity, error) {
		r := httptest.NewRequest("GET", "/v1/sessions", nil)
		r.Header.Set("Authorization", "Bearer "+key)
		return a.Authenticate(t.Context(), r)
	}
	want := &auth.Identity{Tenant: "acme", KeyID: k.ID, Admin: true, Method: auth.MethodKey}
	got, err := authenticate(plaintext)
	if err != nil {
		t.Fatalf("Authenticate() after reopen = %v, want nil", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Authenticate() mismatch (-want +got):\n%s", diff)
	}

	wrong := auth.KeyPrefix + k.ID + "_" + strings.Repeat("a", auth.KeySecretLen)
	unknown := auth.KeyPrefix + "zzzzzzzzzzzz_" + other
	_, errWrong := authenticate(wrong)
	_, errUnknown := authenticate(unknown)
	if !errdefs.Is(errWrong, errdefs.ErrUnauthenticated) || !errdefs.Is(errUnknown, errdefs.ErrUnauthenticated) ||
		errWrong.Error() != errUnknown.Error() {
		t.Errorf("Authenticate(wrong secret) = %v, Authenticate(unknown id) = %v, want the same unauthenticated error", errWrong, errUnknown)
	}

	if err := a.RevokeKey(t.Context(), "acme", k.ID); err != nil {
		t.Fatalf("RevokeKey() = %v, want nil", err)
	}
	if _, err := authenticate(plaintext); !errdefs.Is(err, errdefs.ErrUnauthenticated) || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("Authenticate(revoked) = %v, want unauthenticated, revoked", err)
	}
	ks, err := a.ListKeys(t.Context(), "acme")
	if err != nil || len(ks) != 1 || ks[0].RevokedAt == nil {
		t.Errorf("ListKeys(acme) = %+v, %v, want the one revoked key", ks, err)
	}
}
