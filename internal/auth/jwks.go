package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// JWKS timing. Variables so that tests can shorten them.
var (
	// jwksFetchTimeout bounds one GET of a JWKS URL.
	jwksFetchTimeout = 10 * time.Second
	// jwksMinRefresh is the least time between two fetches of a JWKS URL,
	// whatever asks for them: a token naming an unknown kid cannot make us
	// hammer the identity provider.
	jwksMinRefresh = time.Minute
	// jwksMaxAge is how long a fetched set is used before it is fetched
	// again (subject to jwksMinRefresh), so keys the provider dropped stop
	// working. A failed refetch keeps the old set.
	jwksMaxAge = time.Hour
)

// maxJWKSSize bounds a JWKS document.
const maxJWKSSize = 1 << 20

// RSA modulus sizes accepted from a JWKS: below 2048 bits is weak, above
// 8192 makes every verification slow for nothing.
const (
	minRSABits = 2048
	maxRSABits = 8192
)

// jwks is a JSON Web Key Set read from a URL or a file, kept in memory.
//
// A URL is fetched when a token first needs it, again when a token names a
// key id the set lacks or the set is older than jwksMaxAge, but never twice
// within jwksMinRefresh. A file is read when the jwks is made and again
// whenever it changes (its size, mtime or inode), which is checked on each
// use. Only one load runs at a time; the callers that wait for it then use
// its result rather than loading again. A failed load keeps the last good
// set.
type jwks struct {
	url    string // the set's URL, or
	file   string // the set's file
	client *http.Client
	now    func() time.Time

	sem chan struct{} // held while loading

	mu      sync.Mutex
	keys    []jwkKey  // the last good set
	loaded  time.Time // when keys were fetched (URL)
	tried   time.Time // when the last load began (URL)
	stamp   fileStamp // the file as of the last load (file)
	lastErr error     // why the last load failed, nil if it worked
}

// jwkKey is one usable key of a set.
type jwkKey struct {
	kid string
	alg string // the one algorithm the key verifies: "RS256" or "ES256"
	key any    // *rsa.PublicKey or *ecdsa.PublicKey
}

func newJWKSURL(url string, now func() time.Time) *jwks {
	return &jwks{url: url, client: &http.Client{Timeout: jwksFetchTimeout}, now: now, sem: make(chan struct{}, 1)}
}

// newJWKSFile reads the set in file, which must hold at least one usable
// key.
func newJWKSFile(file string, now func() time.Time) (*jwks, error) {
	j := &jwks{file: file, now: now, sem: make(chan struct{}, 1)}
	j.load(context.Background())
	if j.lastErr != nil {
		return nil, j.lastErr
	}
	return j, nil
}

// lookup returns the keys that may have signed a token with alg whose
// header names kid: the key of that id, or for kid "" every key for alg.
func (j *jwks) lookup(ctx context.Context, kid, alg string) ([]any, error) {
	if keys := j.cached(kid, alg); keys != nil {
		return keys, nil
	}
	select {
	case j.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, errdefs.New(errdefs.ErrUnavailable, "wait for the JWKS: %w", ctx.Err())
	}
	defer func() { <-j.sem }()
	// Whoever held sem may have loaded what we need.
	if keys := j.cached(kid, alg); keys != nil {
		return keys, nil
	}
	if j.due() {
		j.load(ctx)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if keys := matchKeys(j.keys, kid, alg); keys != nil {
		return keys, nil // maybe stale: the provider is slow or down
	}
	if j.lastErr != nil {
		return nil, errdefs.New(errdefs.ErrUnavailable, "cannot verify the JWT: %w", j.lastErr)
	}
	if kid == "" {
		return nil, unauthenticated("invalid JWT: no %s key in the JWKS", alg)
	}
	return nil, unauthenticated("invalid JWT: no %s key with id %q in the JWKS", alg, kid)
}

// cached returns the keys for kid and alg if the set holds them and still
// stands for its source, or nil.
func (j *jwks) cached(kid, alg string) []any {
	var stamp fileStamp
	if j.file != "" {
		stamp = stampOf(j.file) // a syscall; not under mu
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.file != "" {
		if stamp != j.stamp {
			return nil
		}
	} else if j.loaded.IsZero() || j.now().Sub(j.loaded) >= jwksMaxAge {
		return nil
	}
	return matchKeys(j.keys, kid, alg)
}

// due reports whether a load may run now.
//
// Preconditions: j.sem is held.
func (j *jwks) due() bool {
	if j.file != "" {
		stamp := stampOf(j.file)
		j.mu.Lock()
		defer j.mu.Unlock()
		return stamp != j.stamp
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.tried.IsZero() || j.now().Sub(j.tried) >= jwksMinRefresh
}

// load reads the set from its source and keeps it if it parses.
//
// Preconditions: j.sem is held, or j is not yet shared.
func (j *jwks) load(ctx context.Context) {
	now := j.now()
	var (
		data  []byte
		stamp fileStamp
		err   error
	)
	if j.file != "" {
		// Stamp first: a change after it makes the next stamp differ.
		stamp = stampOf(j.file)
		data, err = readFileLimited(j.file)
	} else {
		data, err = j.fetch(ctx)
	}
	var keys []jwkKey
	if err == nil {
		keys, err = parseJWKS(data)
	}
	source := j.url
	if j.file != "" {
		source = j.file
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.tried, j.stamp = now, stamp
	if err != nil {
		j.lastErr = fmt.Errorf("JWKS %s: %w", source, err)
		return
	}
	j.keys, j.loaded, j.lastErr = keys, now, nil
}

// fetch GETs the set's URL. The fetch serves every caller waiting for it,
// so it does not end when ctx is cancelled, only after jwksFetchTimeout.
func (j *jwks) fetch(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), jwksFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := j.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET: %s", resp.Status)
	}
	return readLimited(resp.Body)
}

func readFileLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readLimited(f)
}

func readLimited(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxJWKSSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxJWKSSize {
		return nil, fmt.Errorf("larger than %d bytes", maxJWKSSize)
	}
	return data, nil
}

// fileStamp identifies one version of a file; the zero stamp stands for a
// file that cannot be stat'ed.
type fileStamp struct {
	ino, size, mtime int64
}

func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	s := fileStamp{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ino = int64(st.Ino)
	}
	return s
}

// matchKeys returns the keys in ks for alg and kid (any id for kid ""), or
// nil.
func matchKeys(ks []jwkKey, kid, alg string) []any {
	var out []any
	for _, k := range ks {
		if k.alg == alg && (kid == "" || k.kid == kid) {
			out = append(out, k.key)
		}
	}
	return out
}

// jwk is one JSON Web Key (RFC 7517), with the members we read.
type jwk struct {
	Kty    string   `json:"kty"`
	Kid    string   `json:"kid"`
	Use    string   `json:"use"`
	KeyOps []string `json:"key_ops"`
	Alg    string   `json:"alg"`
	N      string   `json:"n"`
	E      string   `json:"e"`
	Crv    string   `json:"crv"`
	X      string   `json:"x"`
	Y      string   `json:"y"`
}

// errSkip marks a key that is well-formed but not for us: an encryption
// key, another algorithm, another curve.
var errSkip = errors.New("not an RS256 or ES256 signing key")

// parseJWKS returns the RS256 and ES256 signature keys of a JWKS document
// (RFC 7517 section 5). It skips keys of other kinds and fails on a
// malformed key of ours, or a set with none.
func parseJWKS(data []byte) ([]jwkKey, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	var keys []jwkKey
	for i, raw := range set.Keys {
		var k jwk
		if err := json.Unmarshal(raw, &k); err != nil {
			return nil, fmt.Errorf("key %d: %w", i, err)
		}
		key, alg, err := k.publicKey()
		if errors.Is(err, errSkip) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("key %d (kid %q): %w", i, k.Kid, err)
		}
		keys = append(keys, jwkKey{kid: k.Kid, alg: alg, key: key})
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("no RS256 or ES256 signing key among its %d keys", len(set.Keys))
	}
	return keys, nil
}

// publicKey returns k's key and the algorithm it verifies, or errSkip.
func (k *jwk) publicKey() (any, string, error) {
	if k.Use != "" && k.Use != "sig" {
		return nil, "", errSkip
	}
	if len(k.KeyOps) > 0 && !slices.Contains(k.KeyOps, "verify") {
		return nil, "", errSkip
	}
	switch k.Kty {
	case "RSA":
		if k.Alg != "" && k.Alg != "RS256" {
			return nil, "", errSkip
		}
		key, err := k.rsaKey()
		return key, "RS256", err
	case "EC":
		if k.Crv != "P-256" || (k.Alg != "" && k.Alg != "ES256") {
			return nil, "", errSkip
		}
		key, err := k.ecKey()
		return key, "ES256", err
	}
	return nil, "", errSkip
}

func (k *jwk) rsaKey() (*rsa.PublicKey, error) {
	nb, err := decodeB64URL(k.N)
	if err != nil {
		return nil, fmt.Errorf("n: %w", err)
	}
	eb, err := decodeB64URL(k.E)
	if err != nil {
		return nil, fmt.Errorf("e: %w", err)
	}
	n := new(big.Int).SetBytes(nb)
	if bits := n.BitLen(); bits < minRSABits || bits > maxRSABits {
		return nil, fmt.Errorf("RSA modulus of %d bits, want %d to %d", bits, minRSABits, maxRSABits)
	}
	e := new(big.Int).SetBytes(eb)
	if !e.IsInt64() || e.Int64() < 3 || e.Int64() > 1<<31-1 || e.Bit(0) == 0 {
		return nil, fmt.Errorf("RSA exponent %s: want an odd number from 3 to 2^31-1", e)
	}
	return &rsa.PublicKey{N: n, E: int(e.Int64())}, nil
}

func (k *jwk) ecKey() (*ecdsa.PublicKey, error) {
	x, err := decodeB64URL(k.X)
	if err != nil {
		return nil, fmt.Errorf("x: %w", err)
	}
	y, err := decodeB64URL(k.Y)
	if err != nil {
		return nil, fmt.Errorf("y: %w", err)
	}
	// RFC 7518 section 6.2.1.2: the full coordinate size, 32 bytes for P-256.
	if len(x) != 32 || len(y) != 32 {
		return nil, fmt.Errorf("P-256 coordinates of %d and %d bytes, want 32", len(x), len(y))
	}
	point := append(append([]byte{4}, x...), y...)
	key, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), point) // checks the point is on the curve
	if err != nil {
		return nil, err
	}
	return key, nil
}

// decodeB64URL decodes base64url, which RFC 7515 writes without padding;
// padding is tolerated.
func decodeB64URL(s string) ([]byte, error) {
	if s == "" {
		return nil, errors.New("missing")
	}
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}
