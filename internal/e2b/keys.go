package e2b

import (
	"context"
	"encoding/hex"
	"net/http"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/edge"
	"github.com/warrenhq/warren/internal/errdefs"
)

// E2B's SDKs accept only keys of the form e2b_ + 40 lowercase hex digits
// (160 bits), checked on the client. A warren key (wrn_<12 base32 id>_<32
// base32 secret>) carries 220 bits and does not fit, so an E2B key is a
// warren key made to fit: its 60-bit id and a secret of 20 random base32
// characters (100 bits) followed by 12 fixed 'a's. The 160 bits of id and
// random secret, in hex, are the E2B key; the warren key, stored hashed
// like any other, stays the secret, and either spelling authenticates the
// same key (revoke it with `warren keys revoke <id>`). 100 bits of secret
// are far beyond guessing through a rate-limited API.

// e2bKeyPrefix starts an E2B API key.
const e2bKeyPrefix = "e2b_"

// secretPad fills the part of an E2B-compatible key's secret that the E2B
// spelling cannot carry.
const secretPad = "aaaaaaaaaaaa"

const (
	randomSecretLen = auth.KeySecretLen - len(secretPad) // 20 characters, 100 bits
	keyBits         = (auth.KeyIDLen + randomSecretLen) * 5
)

const b32 = "abcdefghijklmnopqrstuvwxyz234567"

// warrenKey returns the warren key an E2B key spells; ok is false if k is
// not e2b_ + 40 lowercase hex digits.
func warrenKey(k string) (string, bool) {
	h, ok := strings.CutPrefix(k, e2bKeyPrefix)
	if !ok || len(h) != keyBits/4 || strings.ToLower(h) != h {
		return "", false
	}
	raw, err := hex.DecodeString(h)
	if err != nil {
		return "", false
	}
	chars := make([]byte, 0, auth.KeyIDLen+randomSecretLen)
	var acc uint64
	var n uint
	for _, b := range raw {
		acc = acc<<8 | uint64(b)
		n += 8
		for n >= 5 {
			chars = append(chars, b32[(acc>>(n-5))&31])
			n -= 5
		}
	}
	return auth.KeyPrefix + string(chars[:auth.KeyIDLen]) + "_" + string(chars[auth.KeyIDLen:]) + secretPad, true
}

// e2bKey returns the E2B spelling of a warren key; ok is false unless the
// key was made to fit (newKey).
func e2bKey(k string) (string, bool) {
	id, secret, ok := auth.ParseKey(k)
	if !ok || !strings.HasSuffix(secret, secretPad) {
		return "", false
	}
	s := id + secret[:randomSecretLen]
	raw := make([]byte, 0, keyBits/8)
	var acc uint64
	var n uint
	for i := 0; i < len(s); i++ {
		acc = acc<<5 | uint64(strings.IndexByte(b32, s[i]))
		n += 5
		for n >= 8 {
			raw = append(raw, byte(acc>>(n-8)))
			n -= 8
		}
	}
	return e2bKeyPrefix + hex.EncodeToString(raw), true
}

// newKey makes a warren key of tenant whose secret fits an E2B key and
// stores it; it returns both spellings.
func (s *Server) newKey(ctx context.Context, tenant, name string, admin bool) (warren, e2b string, k *auth.Key, err error) {
	for attempt := 0; ; attempt++ {
		// GenerateKey checks the tenant and the name and draws the id;
		// the secret is replaced by one that fits.
		plain, key, _, err := auth.GenerateKey(tenant, name, admin, nil)
		if err != nil {
			return "", "", nil, err
		}
		_, full, _ := auth.ParseKey(plain)
		secret := full[:randomSecretLen] + secretPad
		warren = auth.KeyPrefix + key.ID + "_" + secret
		err = s.keys.CreateKey(ctx, key, auth.HashSecret(secret))
		if errdefs.Is(err, errdefs.ErrConflict) && attempt < 2 {
			continue
		}
		if err != nil {
			return "", "", nil, err
		}
		e2b, _ = e2bKey(warren)
		return warren, e2b, key, nil
	}
}

// createdKey is E2B's CreatedTeamAPIKey, with the warren spelling beside.
type createdKey struct {
	ID        string    `json:"id"`
	Key       string    `json:"key"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	WarrenKey string    `json:"warrenKey"`
	Tenant    string    `json:"tenant"`
}

// createKey serves POST /api-keys: a caller authenticated with a key of
// its tenant (either spelling) gets a new E2B-format key of the same
// tenant; an admin may name another tenant in "tenant" and ask for an
// admin key.
func (s *Server) createKey(w http.ResponseWriter, r *http.Request) {
	if s.keys == nil {
		s.writeError(w, r, errdefs.New(errdefs.ErrUnavailable, "this daemon runs without authentication, so it has no API keys: any e2b_ key is accepted"))
		return
	}
	var req struct {
		Name   string `json:"name"`
		Tenant string `json:"tenant"`
		Admin  bool   `json:"admin"`
	}
	if err := decode(r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	who := edge.IdentityOf(r.Context())
	tenant := who.Tenant
	if (req.Tenant != "" && req.Tenant != tenant) || req.Admin {
		if err := edge.RequireAdmin(r.Context(), "creating a key of another tenant or an admin key"); err != nil {
			s.writeError(w, r, err)
			return
		}
		if req.Tenant != "" {
			tenant = req.Tenant
		}
	}
	start := time.Now()
	warren, e2b, k, err := s.newKey(r.Context(), tenant, req.Name, req.Admin)
	s.edge.Record(r.Context(), "e2b create key", "", tenant, err, start)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, createdKey{ID: k.ID, Key: e2b, Name: k.Name, CreatedAt: k.CreatedAt, WarrenKey: warren, Tenant: k.Tenant})
}
