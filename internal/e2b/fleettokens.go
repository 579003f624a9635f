package e2b

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// In a fleet, envd access tokens are made with a key derived from the
// fleet's shared secret rather than the node's e2b-secret, so that any node
// can compute any sandbox's token from the registry's record of it (tenant,
// id, creation time) and route a signed /files URL, which names no sandbox,
// to the sandbox's owner (docs/FLEET.md, "Routing"). Only sandboxes created
// after the node first ran in a fleet get such tokens: a sandbox keeps the
// token it was given for its whole life (the SDK holds it), so a single
// node that joins a fleet with sandboxes running changes none of theirs.

// fleetTokenLabel derives the fleet's token key from its secret: the
// secret itself signs forwarded requests, and a key for one purpose only
// cannot be replayed as the other.
const fleetTokenLabel = "warren e2b envd access tokens v1"

// fleetSinceFile, next to the e2b-secret, holds when the node first ran in
// a fleet: the sandboxes created from then on have fleet tokens.
const fleetSinceFile = "e2b-fleet-since"

func fleetTokenKey(secret []byte) []byte {
	if secret == nil {
		return nil
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(fleetTokenLabel))
	return m.Sum(nil)
}

// tokenWith is the access token of the sandbox (tenant, id, created)
// under key: "wre_" and an HMAC of the three.
func tokenWith(key []byte, tenant, id string, created time.Time) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("envd\x00" + tenant + "\x00" + id + "\x00" + strconv.FormatInt(created.UnixNano(), 10)))
	return "wre_" + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// loadFleetSince reads when the node first ran in a fleet from the file
// beside secretFile, recording now if it never did ("" secretFile: now,
// kept in memory only).
func loadFleetSince(secretFile string) (time.Time, error) {
	now := time.Now()
	if secretFile == "" {
		return now, nil
	}
	file := filepath.Join(filepath.Dir(secretFile), fleetSinceFile)
	b, err := os.ReadFile(file)
	if err == nil {
		t, perr := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b)))
		if perr == nil {
			return t, nil
		}
		return time.Time{}, fmt.Errorf("e2b: %s: %w", file, perr)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return time.Time{}, fmt.Errorf("e2b: %w", err)
	}
	if err := os.WriteFile(file, []byte(now.UTC().Format(time.RFC3339Nano)+"\n"), 0o600); err != nil {
		return time.Time{}, fmt.Errorf("e2b: %w", err)
	}
	return now, nil
}

// FleetFiles finds, on any node of a fleet, the sandbox a signed /files
// URL was made for when the URL does not name it (the SDK's downloadUrl
// and uploadUrl built on the API's address): the one, among the fleet's
// records, whose fleet token makes the URL's signature. The router then
// forwards the request to its owner, which checks the signature again.
// Sandboxes with node tokens (created before their node joined the fleet)
// are not found: their owner alone serves such URLs.
type FleetFiles struct {
	secret func() []byte

	mu     sync.RWMutex
	key    []byte              // the token key, derived from keyOf; guarded by mu
	keyOf  []byte              // guarded by mu
	tokens map[tokenKey][]byte // the fleet tokens computed so far; guarded by mu
	hashes sync.Pool           // of hash.Hash (SHA-256)
}

type tokenKey struct {
	tenant, id string
	created    int64
}

// maxTokens bounds FleetFiles' memo of tokens; past it the memo starts
// afresh (a few milliseconds of HMACs for 10,000 sandboxes, once).
const maxTokens = 200_000

// NewFleetFiles returns a FleetFiles over the fleet's secret (nil while it
// is not known).
func NewFleetFiles(secret func() []byte) *FleetFiles {
	return &FleetFiles{secret: secret, tokens: map[tokenKey][]byte{},
		hashes: sync.Pool{New: func() any { return sha256.New() }}}
}

// Sandbox returns the id of the sandbox whose fleet token makes the
// signature of r, a signed /files request, among the sandboxes each
// yields (tenant, id, creation time); "" if none does, or r is not one.
func (f *FleetFiles) Sandbox(r *http.Request, each func(yield func(tenant, id string, created time.Time) bool)) string {
	q := r.URL.Query()
	sig, ok := strings.CutPrefix(q.Get("signature"), "v1_")
	if !ok || r.URL.Path != "/files" {
		return ""
	}
	want, err := base64.RawStdEncoding.DecodeString(sig)
	if err != nil || len(want) != sha256.Size {
		return ""
	}
	key := f.keyNow()
	if key == nil {
		return ""
	}
	op := "read"
	if r.Method == http.MethodPost || r.Method == http.MethodPut {
		op = "write"
	}
	// signature(): sha256(path:op:user:token[:exp]).
	prefix := []byte(q.Get("path") + ":" + op + ":" + q.Get("username") + ":")
	var suffix []byte
	if exp := q.Get("signature_expiration"); exp != "" {
		suffix = []byte(":" + exp)
	}
	h := f.hashes.Get().(hash.Hash)
	defer f.hashes.Put(h)
	var sum [sha256.Size]byte
	var found string
	var missed []tokenKey
	var made [][]byte
	f.mu.RLock()
	each(func(tenant, id string, created time.Time) bool {
		k := tokenKey{tenant, id, created.UnixNano()}
		tok, ok := f.tokens[k]
		if !ok {
			tok = []byte(tokenWith(key, tenant, id, created))
			missed, made = append(missed, k), append(made, tok)
		}
		h.Reset()
		h.Write(prefix)
		h.Write(tok)
		h.Write(suffix)
		if bytes.Equal(h.Sum(sum[:0]), want) {
			found = id
			return false
		}
		return true
	})
	f.mu.RUnlock()
	if len(missed) > 0 {
		f.mu.Lock()
		if len(f.tokens)+len(missed) > maxTokens {
			clear(f.tokens)
		}
		for i, k := range missed {
			f.tokens[k] = made[i]
		}
		f.mu.Unlock()
	}
	return found
}

// keyNow is the token key of the fleet's current secret, nil while it is
// not known.
func (f *FleetFiles) keyNow() []byte {
	secret := f.secret()
	if secret == nil {
		return nil
	}
	f.mu.RLock()
	key, same := f.key, bytes.Equal(f.keyOf, secret)
	f.mu.RUnlock()
	if same {
		return key
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !bytes.Equal(f.keyOf, secret) {
		f.key, f.keyOf = fleetTokenKey(secret), secret
		clear(f.tokens)
	}
	return f.key
}
