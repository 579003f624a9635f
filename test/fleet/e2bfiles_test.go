package fleet

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/testutil"
)

// e2bSignature is envd's URL signature, computed the way E2B's SDK does
// (sandbox.downloadUrl, uploadUrl): v1_ and base64(sha256(path:operation:
// user:token[:expiration])).
func e2bSignature(path, op, user, token, exp string) string {
	raw := path + ":" + op + ":" + user + ":" + token
	if exp != "" {
		raw += ":" + exp
	}
	sum := sha256.Sum256([]byte(raw))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// signedFilesURL is a signed /files URL built on a node's API address, as
// the SDK builds it there: it names no sandbox.
func signedFilesURL(n *node, path, op, token, exp string) string {
	q := url.Values{"path": {path}, "signature": {e2bSignature(path, op, "", token, exp)}}
	if exp != "" {
		q.Set("signature_expiration", exp)
	}
	return n.url + "/files?" + q.Encode()
}

// TestFleetE2BSignedFiles: a signed /files URL built on the API's address
// (the SDK's downloadUrl and uploadUrl behind a load balancer) names no
// sandbox; every node finds the sandbox whose access token made the
// signature (the fleet's tokens) and forwards the request to its owner. A
// wrong or expired signature is still refused (401).
func TestFleetE2BSignedFiles(t *testing.T) {
	testutil.RequiresRoot(t)
	_, nodes, reg := newFleet(t, 2, embeddedEtcd(t))
	k, err := nodes[0].c.CreateKey(bg, &api.CreateKeyRequest{Tenant: "filest"})
	if err != nil {
		t.Fatal(err)
	}
	do := func(req *http.Request) (int, string) {
		t.Helper()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	req, _ := http.NewRequest("POST", nodes[0].url+"/e2b/sandboxes", strings.NewReader(`{"templateID":"base","timeout":120}`))
	req.Header.Set("Authorization", "Bearer "+k.Secret)
	req.Header.Set("Content-Type", "application/json")
	st, b := do(req)
	var sb struct{ SandboxID, EnvdAccessToken string }
	if st != http.StatusCreated || json.Unmarshal([]byte(b), &sb) != nil || sb.EnvdAccessToken == "" {
		t.Fatalf("E2B create: %d %s", st, b)
	}
	t.Cleanup(func() {
		req, _ := http.NewRequest("DELETE", nodes[0].url+"/e2b/sandboxes/"+sb.SandboxID, nil)
		req.Header.Set("Authorization", "Bearer "+k.Secret)
		do(req)
	})
	r, err := reg.GetSession(bg, "filest", sb.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	owner, other := nodes[0], nodes[1]
	if r.Node != owner.name {
		owner, other = other, owner
	}
	eventually(t, 3*time.Second, other.name+" has the record of "+sb.SandboxID, func() bool {
		st, _ := do(mustRequest(t, "GET", signedFilesURL(other, "/etc/hostname", "read", sb.EnvdAccessToken, ""), nil, ""))
		return st == http.StatusOK
	})

	// An upload through the node that does not own the sandbox.
	content := fmt.Sprint("written through ", other.name, " at ", time.Now().UnixNano())
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", "blob") // the SDK's name for a part written to the URL's path
	fw.Write([]byte(content))
	mw.Close()
	exp := fmt.Sprint(time.Now().Add(time.Minute).Unix())
	if st, b := do(mustRequest(t, "POST", signedFilesURL(other, "/tmp/up.txt", "write", sb.EnvdAccessToken, exp), &body, mw.FormDataContentType())); st != http.StatusOK {
		t.Fatalf("signed upload through %s (the owner is %s): %d %s", other.name, owner.name, st, b)
	}
	// Downloads through either node read it.
	for _, n := range []*node{other, owner} {
		if st, b := do(mustRequest(t, "GET", signedFilesURL(n, "/tmp/up.txt", "read", sb.EnvdAccessToken, exp), nil, "")); st != http.StatusOK || b != content {
			t.Fatalf("signed download through %s: %d %q, want %q", n.name, st, b, content)
		}
	}
	// Refused wherever they come in: a wrong signature, a signature for
	// another path or operation, an expired one.
	bad := []struct{ what, method, url string }{
		{"a made-up signature", "GET", other.url + "/files?path=/tmp/up.txt&signature=v1_" + strings.Repeat("A", 43)},
		{"another token", "GET", signedFilesURL(other, "/tmp/up.txt", "read", "wre_not-the-token", "")},
		{"a read signature used to write", "POST", signedFilesURL(other, "/tmp/up.txt", "read", sb.EnvdAccessToken, "")},
		{"an expired signature", "GET", signedFilesURL(other, "/tmp/up.txt", "read", sb.EnvdAccessToken, fmt.Sprint(time.Now().Add(-time.Minute).Unix()))},
	}
	for _, c := range bad {
		for _, n := range []*node{other, owner} {
			u := strings.Replace(c.url, other.url, n.url, 1)
			if st, b := do(mustRequest(t, c.method, u, nil, "")); st != http.StatusUnauthorized {
				t.Fatalf("%s through %s: %d %s, want 401", c.what, n.name, st, b)
			}
		}
	}
}

func mustRequest(t *testing.T, method, u string, body io.Reader, contentType string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return req
}
