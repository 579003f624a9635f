package edge

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// ForwardHeader marks a request one fleet node forwarded to the session's
// owner. It carries the caller the forwarding node admitted, signed with
// the fleet's secret, bound to the request's method and path and valid for
// forwardTTL: the owner takes the caller from it (it need not look the
// key up again) and never forwards such a request again (one hop at most). A
// client cannot forge one without the secret; a forged or stale one is
// refused as unauthenticated.
const ForwardHeader = "Warren-Forwarded"

// SessionHeader names the session a gRPC or Connect call acts on. The id
// is inside the call's message; with this header (gRPC metadata
// warren-session) any node routes the call without reading it. A call
// without it is routed by the id peeked from its first message (peekRPC).
const SessionHeader = "Warren-Session"

// forwardTTL bounds a forwarded request's signature: the hop takes
// milliseconds; the rest allows for clock skew between nodes.
const forwardTTL = 30 * time.Second

// Owner is where a session lives, as the fleet's routing cache knows it.
type Owner struct {
	// Known: the cache has a record of the session; the rest is unset
	// otherwise.
	Known bool
	// Here: this node owns it.
	Here bool
	// Node and Addr name the owner and its base URL.
	Node, Addr string
	// Alive: the owner's registry entry is there (false: dead or cut
	// off, its sessions unreachable until it returns or is declared lost).
	Alive bool
	// Lost: the fleet declared the session lost with its node.
	Lost bool
	// Moving: its node is moving it to another node (drain --move); it
	// answers nowhere until the move ends.
	Moving bool
}

// Forwarding is what Forward needs from the fleet.
type Forwarding struct {
	// Locate returns the owner of (tenant, id).
	Locate func(tenant, id string) Owner
	// LocateID returns the owner of a session known only by its id: an
	// E2B sandbox's envd reached with the sandbox's access token or a
	// signed URL, which name no tenant (nil: such requests stay here).
	LocateID func(id string) Owner
	// SignedSandbox, if set, returns the sandbox a signed E2B /files URL
	// that names none (built on the API's address) was made for: the one
	// whose access token makes its signature ("" if none is known).
	SignedSandbox func(r *http.Request) string
	// Credentials, if set, returns r with its credentials in the form
	// the authenticator takes (the E2B facade's e2b_ keys become warren
	// keys), for Forward to learn the caller's tenant.
	Credentials func(r *http.Request) (*http.Request, error)
	// Secret returns the fleet's secret, nil while it is not known yet.
	Secret func() []byte
	// Place picks the node a new session goes to, leaving out the nodes
	// in exclude (they refused it for a reason of their own), Here when
	// this one, or Known false when none is better known; nil: creates
	// stay here.
	Place func(exclude []string) Owner
	// ForgetLost removes the record of a lost session (a DELETE of it):
	// its node is gone, so no node can delete it, and its id is free
	// again afterwards.
	ForgetLost func(ctx context.Context, tenant, id string) error
	// PreviewDomain is the daemon's preview_domain: a request for
	// {port}-{session}.PreviewDomain is routed by its session ("": none).
	PreviewDomain string
	// Peers, if set, makes lists of sessions cover the fleet
	// (FleetLister, on every transport): it returns the other nodes that may hold tenant's sessions ("":
	// every tenant's), live ones (Alive) to ask and dead ones holding
	// some to name as missing, and the sessions declared lost.
	Peers func(tenant string) ([]Owner, []LostSession)
	// Node is this node's name (in the signed caller, for the logs).
	Node string
	// Transport carries forwarded requests (if nil: HTTP/1.1, and for
	// requests that came in over HTTP/2, such as gRPC, h2c to an http://
	// node and HTTP/2 over TLS to an https:// one).
	Transport http.RoundTripper
	// TLS is the client configuration for nodes advertised at https://
	// (nil: the host's roots); unused with Transport.
	TLS *tls.Config

	// defaultTr is transport's HTTP/1.1 transport, made once: forwards
	// and the lists' fan-out share its connections to the nodes.
	defaultTr     http.RoundTripper
	defaultTrOnce sync.Once
}

// transport is f.Transport, or HTTP/1.1 to the nodes (over TLS with f.TLS
// to https:// ones), one for the life of f.
func (f *Forwarding) transport() http.RoundTripper {
	if f.Transport != nil {
		return f.Transport
	}
	f.defaultTrOnce.Do(func() {
		f.defaultTr = &http.Transport{Proxy: nil, TLSClientConfig: f.TLS, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}
	})
	return f.defaultTr
}

// forwarded is the signed content of ForwardHeader.
type forwarded struct {
	Tenant  string `json:"t"`
	KeyID   string `json:"k,omitempty"`
	Subject string `json:"s,omitempty"`
	Admin   bool   `json:"a,omitempty"`
	Method  string `json:"m"`
	// Request is the forwarded request's method and path: the signature
	// holds for that request only.
	Request string `json:"r"`
	From    string `json:"f"`
	Expires int64  `json:"x"`
	// Anon: the sender did not authenticate the request (E2B envd traffic
	// with a sandbox's access token, which only the owner can check); it
	// names no caller, marks the hop only, and the owner authenticates
	// the request itself.
	Anon bool `json:"n,omitempty"`
	// Nonce makes each signature once-only: the receiving node refuses a
	// nonce it has seen (hopNonces), so a hop captured on the wire cannot
	// be sent again while it is valid.
	Nonce string `json:"o"`
}

type forwardedKey struct{}

// forwardedIdentity is the caller a verified ForwardHeader named, nil for
// a request that was not forwarded.
func forwardedIdentity(ctx context.Context) *auth.Identity {
	id, _ := ctx.Value(forwardedKey{}).(*auth.Identity)
	return id
}

// sign returns the header value for the caller who, for r; a nil who is
// an anonymous hop (forwarded.Anon).
func sign(secret []byte, who *auth.Identity, r *http.Request, from string) string {
	var nonce [12]byte
	_, _ = rand.Read(nonce[:]) // crypto/rand.Read does not fail (Go 1.24)
	f := forwarded{Anon: true, Request: r.Method + " " + r.URL.EscapedPath(), From: from, Expires: time.Now().Add(forwardTTL).Unix(),
		Nonce: base64.RawURLEncoding.EncodeToString(nonce[:])}
	if who != nil {
		f.Anon, f.Tenant, f.KeyID, f.Subject, f.Admin, f.Method = false, who.Tenant, who.KeyID, who.Subject, who.Admin, who.Method
	}
	return encode(secret, f)
}

// SignHop marks r as a request fleet node from makes itself for tenant
// (subject names what makes it, in the owner's audit records): the node
// that receives it admits it as that tenant, like a forwarded request, and
// forwards it no further. A node moving a session away (fleet's mover)
// reaches the target's snapshots and creates so. Set r's method and URL
// first: the signature holds for them only.
func SignHop(secret []byte, r *http.Request, tenant, subject, from string) {
	r.Header.Set(ForwardHeader, sign(secret, &auth.Identity{Tenant: tenant, Subject: subject, Method: MethodHop}, r, from))
}

// MethodHop is the Method of the identity a SignHop request is admitted
// as: only a fleet node, which has the fleet's secret, makes one.
const MethodHop = "fleet"

func encode(secret []byte, f forwarded) string {
	b, _ := json.Marshal(f)
	mac := hmac.New(sha256.New, secret)
	mac.Write(b)
	return base64.RawURLEncoding.EncodeToString(b) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// verify checks a ForwardHeader value against r and returns its caller,
// nil for an anonymous hop, and the signed content. It does not check the
// nonce: Edge.verifyHop does.
func verify(secret []byte, v string, r *http.Request) (*auth.Identity, forwarded, error) {
	bad := errdefs.New(errdefs.ErrUnauthenticated, "the %s header does not carry a valid signature of a fleet node", ForwardHeader)
	p, s, ok := strings.Cut(v, ".")
	if !ok || len(secret) == 0 {
		return nil, forwarded{}, bad
	}
	b, err1 := base64.RawURLEncoding.DecodeString(p)
	sig, err2 := base64.RawURLEncoding.DecodeString(s)
	if err1 != nil || err2 != nil {
		return nil, forwarded{}, bad
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(b)
	if !hmac.Equal(sig, mac.Sum(nil)) {
		return nil, forwarded{}, bad
	}
	var f forwarded
	if json.Unmarshal(b, &f) != nil || f.Request != r.Method+" "+r.URL.EscapedPath() || time.Now().Unix() > f.Expires || (f.Tenant == "") != f.Anon {
		return nil, forwarded{}, bad
	}
	if f.Expires > time.Now().Add(2*forwardTTL).Unix() {
		// Valid for longer than any node signs for: a clock far ahead,
		// or a hop meant to outlive the replay guard's memory.
		return nil, forwarded{}, bad
	}
	if f.Anon {
		return nil, f, nil
	}
	return &auth.Identity{Tenant: f.Tenant, KeyID: f.KeyID, Subject: f.Subject, Admin: f.Admin, Method: f.Method}, f, nil
}

// verifyHop is verify, and the hop's nonce must be new here: a hop is
// served once. A hop without a nonce (from a node of an older version,
// during a rolling upgrade) passes.
func (e *Edge) verifyHop(secret []byte, v string, r *http.Request) (*auth.Identity, string, error) {
	who, f, err := verify(secret, v, r)
	if err != nil {
		return nil, "", err
	}
	if f.Nonce != "" && !e.hops.fresh(f.Nonce) {
		e.log.Warn("refused a fleet hop sent a second time", "from", f.From, "request", f.Request)
		return nil, "", errdefs.New(errdefs.ErrUnauthenticated, "the %s header was used before: a fleet node signs each forwarded request once", ForwardHeader)
	}
	return who, f.From, nil
}

// hopNonces remembers the nonces of the hops served, for as long as they
// could verify (2*forwardTTL at most, verify refuses longer): two
// generations of that length, the older dropped whole at each turn, so
// remembering costs O(1) per hop and memory for at most 4*forwardTTL of
// forwarded requests (about 60 bytes each).
type hopNonces struct {
	mu        sync.Mutex
	cur, prev map[string]struct{}
	since     time.Time
}

func newHopNonces() *hopNonces {
	return &hopNonces{cur: map[string]struct{}{}, prev: map[string]struct{}{}, since: time.Now()}
}

// fresh reports whether nonce is new, and remembers it.
func (h *hopNonces) fresh(nonce string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if age := time.Since(h.since); age >= 2*forwardTTL {
		h.prev, h.cur, h.since = h.cur, map[string]struct{}{}, time.Now()
		if age >= 4*forwardTTL {
			h.prev = map[string]struct{}{}
		}
	}
	if _, ok := h.cur[nonce]; ok {
		return false
	}
	if _, ok := h.prev[nonce]; ok {
		return false
	}
	h.cur[nonce] = struct{}{}
	return true
}

// SessionOfPath returns the session a REST path names
// (/v1/sessions/{id} and everything below it: exec, files, the shell's
// WebSocket, ports), "" for any other path.
func SessionOfPath(path string) string {
	rest, ok := strings.CutPrefix(path, "/v1/sessions/")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "/")
	return id
}

// maxRetryBody is the largest request body kept to send again when the
// owner answered 421 (a stale route): exec and small files; a larger
// upload is not retried, its client sees the 503.
const maxRetryBody = 1 << 20

var errMisdirected = errors.New("misdirected")

// Forward routes requests for sessions this node does not own to their
// owner, below every transport that names the session in its path (REST,
// SSE, the WebSocket PTY, the port proxy, the E2B facade), in a header
// (SessionHeader for gRPC and Connect, E2BSandboxHeader), in its host (preview
// and envd hosts) or in its message (gRPC and Connect, MCP tool calls), and
// places creates. It authenticates the caller
// itself only to learn the tenant; a request for a session of this node,
// or one the fleet does not know, goes to next untouched (and is admitted
// there as always). A forwarded request that reaches a node which no
// longer owns the session is answered 421; the forwarding node then waits
// for its cache to catch up and tries once more.
func (e *Edge) Forward(f *Forwarding, next http.Handler) http.Handler {
	tr := f.transport()
	// gRPC needs HTTP/2 to the owner too: in cleartext, as the daemon
	// serves it (h2c), or over TLS to a node behind a TLS proxy.
	var h2, h2s http.Protocols
	h2.SetUnencryptedHTTP2(true)
	h2s.SetHTTP2(true)
	h2c := &http.Transport{Proxy: nil, Protocols: &h2, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}
	h2tls := &http.Transport{Proxy: nil, Protocols: &h2s, TLSClientConfig: f.TLS, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}
	fw := &forwarder{e: e, f: f, next: next, tr: tr, h2c: h2c, h2tls: h2tls}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isFleetList(f, r) {
			e.verifyListHop(f, w, r, next)
			return
		}
		id := SessionOfPath(r.URL.Path)
		if h := r.Header.Get(SessionHeader); id == "" && h != "" && strings.HasPrefix(r.URL.Path, "/warren.v1.") {
			id = h
		}
		// envd: E2B's in-sandbox API, whose requests may carry only the
		// sandbox's access token (or a signed URL), which name no tenant.
		envd := false
		if id == "" && (strings.HasPrefix(r.URL.Path, "/e2b/") || r.URL.Path == "/files") {
			if h := r.Header.Get(E2BSandboxHeader); h != "" {
				id, envd = h, true
			} else {
				id = SandboxOfE2BPath(r.URL.Path)
			}
		}
		if id == "" && r.URL.Path == "/files" && f.SignedSandbox != nil && r.Header.Get(ForwardHeader) == "" && r.URL.Query().Has("signature") {
			// A signed file URL built on the API's address names its
			// sandbox by its signature alone: routed like envd with
			// E2BSandboxHeader, which the owner then reads (and checks
			// the signature against that sandbox's token).
			if id = f.SignedSandbox(r); id != "" {
				envd = true
				r.Header.Set(E2BSandboxHeader, id)
			}
		}
		if id == "" && f.PreviewDomain != "" {
			var port string
			port, id = sessionOfPreviewHost(r.Host, f.PreviewDomain)
			envd = id != "" && port == e2bEnvdPort
		}
		create := r.Method == http.MethodPost && (r.URL.Path == "/v1/sessions" || r.URL.Path == "/e2b/sandboxes" || r.URL.Path == rpcCreate) && f.Place != nil
		mcp := r.Method == http.MethodPost && r.URL.Path == "/mcp"
		// A gRPC or Connect call without SessionHeader names its session
		// in its message: peeked below (peekRPC).
		rpc := id == "" && r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/warren.v1.") && r.URL.Path != rpcRun && r.URL.Path != rpcCreate
		// A signed hop to a path that names no session (a fleet node's
		// own call, SignHop) is checked below like a forwarded request.
		if id == "" && !create && !mcp && !rpc && r.Header.Get(ForwardHeader) == "" {
			next.ServeHTTP(w, r)
			return
		}
		if v := r.Header.Get(ForwardHeader); v != "" {
			secret := f.Secret()
			if secret == nil {
				// Just started, the registry not answering yet: the
				// sender may try again in a moment.
				e.WriteError(w, r, errdefs.WithRetryAfter(errdefs.ErrUnavailable, time.Second, "this fleet node cannot check forwarded requests yet (no fleet secret)"))
				return
			}
			who, from, err := e.verifyHop(secret, v, r)
			if err != nil {
				e.WriteError(w, r, err)
				return
			}
			if who == nil {
				// An anonymous hop: the request authenticates here as if
				// it came straight (the sandbox's access token).
				if o := f.locateID(id); id != "" && o.Known && !o.Here {
					WriteJSON(w, http.StatusMisdirectedRequest, errorBody("unavailable", "sandbox "+id+" is not on this node (fleet node "+f.Node+"); its route was stale"))
					return
				}
				e.log.Debug("serving a forwarded request", "from", from, "session_id", id, "anonymous", true)
				next.ServeHTTP(w, r)
				return
			}
			if mcp {
				if id, _, err = peekMCP(r); err != nil {
					e.WriteError(w, r, err)
					return
				}
			}
			if rpc {
				id = peekRPC(r)
			}
			if o := f.Locate(who.Tenant, id); id != "" && o.Known && !o.Here {
				// One hop at most: the sender's route was stale.
				WriteJSON(w, http.StatusMisdirectedRequest, errorBody("unavailable", "session "+id+" is not on this node (fleet node "+f.Node+"); its route was stale"))
				return
			}
			e.log.Debug("serving a forwarded request", "from", from, "session_id", id)
			ctx := context.WithValue(r.Context(), forwardedKey{}, who)
			if create || mcp {
				// A create this node refuses for a reason of its own
				// says so, for the sender to place it elsewhere.
				ctx = session.OnNodeRefusal(ctx, func() { w.Header().Set(NodeRefusedHeader, f.Node) })
			}
			next.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		who := noAuthIdentity
		if e.auth != nil {
			ar, err := r, error(nil)
			if f.Credentials != nil {
				ar, err = f.Credentials(r)
			}
			if err == nil {
				who, err = e.auth.Authenticate(r.Context(), ar)
			}
			if err != nil {
				if envd {
					// No credential this node can check: the owner
					// checks the sandbox's access token.
					who = nil
				} else {
					next.ServeHTTP(w, r) // the transport refuses it as always
					return
				}
			}
		}
		var body []byte
		retry := r.ContentLength >= 0 && r.ContentLength <= maxRetryBody && r.Header.Get("Upgrade") == ""
		if create && !retry && r.URL.Path != rpcCreate {
			next.ServeHTTP(w, r) // an odd create (no length, huge): here
			return
		}
		// The body is read (to send again after a 421, or to learn a
		// create's id) only for a request that leaves this node, or a
		// create: a local upload is not copied.
		readBody := func() bool {
			if !retry || r.ContentLength <= 0 || body != nil {
				return true
			}
			var err error
			if body, err = io.ReadAll(io.LimitReader(r.Body, maxRetryBody+1)); err != nil || len(body) > maxRetryBody {
				e.WriteError(w, r, errdefs.New(errdefs.ErrInvalidArgument, "read the request body: %v", err))
				return false
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			return true
		}
		bodyNow := func() ([]byte, bool) { ok := readBody(); return body, ok }
		var o Owner
		placed := false // o is the node placement picked for a create
		if mcp {
			// An MCP tool call names its session in its arguments;
			// the daemon's MCP is stateless, so any node can serve
			// any call.
			if !retry {
				next.ServeHTTP(w, r)
				return
			}
			var err error
			var mcpCreate bool
			if id, mcpCreate, err = peekMCP(r); err != nil || (id == "" && !mcpCreate) {
				next.ServeHTTP(w, r)
				return
			}
			body, _ = io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if mcpCreate {
				// create_session: placed like a REST create.
				o, placed = f.placeCreate(who.Tenant, id)
			} else {
				o = f.Locate(who.Tenant, id)
			}
		} else if rpc {
			if id = peekRPC(r); id == "" {
				next.ServeHTTP(w, r)
				return
			}
			o = f.Locate(who.Tenant, id)
		} else if create {
			// A create of an id the fleet knows goes to its owner (which
			// answers 200 with it, or 409); any other to the node
			// placement picks, which admits it or refuses.
			if r.URL.Path == rpcCreate {
				id = peekRPC(r)
			} else {
				if !readBody() {
					return
				}
				var req struct {
					ID string `json:"id"`
				}
				_ = json.Unmarshal(body, &req) // no id: a create that placement names; bad JSON is the target's to refuse
				id = req.ID
			}
			o, placed = f.placeCreate(who.Tenant, id)
		} else if who == nil {
			o = f.locateID(id)
		} else {
			o = f.Locate(who.Tenant, id)
		}
		if o.Moving {
			e.WriteError(w, r, errdefs.WithRetryAfter(errdefs.ErrUnavailable, time.Second, "session %s is moving to another fleet node; try again in a moment", id))
			return
		}
		// A placed create that a node refuses for a reason of its own (it
		// is full, draining, cut off: session.NodeRefused, which the node
		// marks with NodeRefusedHeader) goes to another candidate, up to
		// maxPlaceTries nodes in all, each one hop from this node, while
		// its body is kept to send again. The last try's answer, or any
		// other refusal (the tenant's quota holds fleet-wide), is the
		// client's.
		var refused []string
		counted := false // the caller's rate limit was applied to this request
		for {
			catch := placed && retry && len(refused)+1 < maxPlaceTries
			if !o.Known || o.Here {
				if catch && !readBody() {
					return
				}
				rr := r
				if counted && who != nil {
					// Admitted once already: not counted twice.
					rr = r.WithContext(context.WithValue(r.Context(), forwardedKey{}, who))
				}
				if body != nil {
					rr.Body = io.NopCloser(bytes.NewReader(body))
				}
				if !catch {
					next.ServeHTTP(w, rr)
					return
				}
				if !e.serveCatchingRefusal(w, rr, next) {
					return
				}
				counted = true // the transport admitted it
			} else if !fw.forwardTo(w, r, o, who, id, catch, &counted, retry, bodyNow) {
				return
			}
			refused = append(refused, o.Node)
			e.log.Debug("a fleet node refused a create for a reason of its own; placing it elsewhere", "node", o.Node, "refused", refused)
			if o = f.Place(refused); !o.Known {
				// Nowhere else: this node serves it, and its own checks
				// answer.
				o, placed = Owner{}, false
			}
		}
	})
}

// maxPlaceTries bounds the nodes a placed create tries when they refuse it
// for a reason of their own (NodeRefusedHeader): the first pick and two
// more. Each refusal costs a round trip; a fleet whose three picks are all
// full is full enough that the client hears it.
const maxPlaceTries = 3

// NodeRefusedHeader marks the answer of a node that refused a forwarded
// create for a reason of its own (full, draining, not registered:
// session.NodeRefused), not the caller's: the forwarding node may place it
// elsewhere. Its value is the refusing node's name. It travels only
// between nodes; the forwarding node removes it.
const NodeRefusedHeader = "Warren-Node-Refused"

var errRefused = errors.New("refused by its node")

// serveCatchingRefusal serves a create here, dropping this node's answer
// when it refuses the create for a reason of its own (nothing reached the
// client then, and it returns true, for the create to be placed
// elsewhere); any other answer goes to the client.
func (e *Edge) serveCatchingRefusal(w http.ResponseWriter, r *http.Request, next http.Handler) (refused bool) {
	// Nothing is written yet: the headers the refusal set are put back
	// as they were when it is dropped.
	saved := w.Header().Clone()
	c := &refusalCatcher{ResponseWriter: w}
	next.ServeHTTP(c, r.WithContext(session.OnNodeRefusal(r.Context(), func() { c.refused.Store(true) })))
	if !c.caught {
		return false
	}
	if cl := callOf(r.Context()); cl != nil {
		cl.mu.Lock()
		cl.code = "" // the next try's answer is the call's
		cl.mu.Unlock()
	}
	clear(w.Header())
	maps.Copy(w.Header(), saved)
	return true
}

// refusalCatcher is the response of a create served here while another
// node could take it: once the node refused it (session.NodeRefused, set
// before the transport answers), what the transport writes is dropped.
type refusalCatcher struct {
	http.ResponseWriter
	refused atomic.Bool // the create's hook ran
	caught  bool        // the answer was a refusal, dropped
	wrote   bool        // the answer went to the client
}

func (c *refusalCatcher) WriteHeader(code int) {
	if c.wrote || c.caught {
		return
	}
	if c.refused.Load() {
		c.caught = true
		return
	}
	c.wrote = true
	c.ResponseWriter.WriteHeader(code)
}

func (c *refusalCatcher) Write(b []byte) (int, error) {
	if !c.wrote && !c.caught {
		c.WriteHeader(http.StatusOK)
	}
	if c.caught {
		return len(b), nil
	}
	return c.ResponseWriter.Write(b)
}

func (c *refusalCatcher) Flush() {
	if c.wrote {
		http.NewResponseController(c.ResponseWriter).Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (c *refusalCatcher) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// forwarder is what Forward's requests leave this node by.
type forwarder struct {
	e    *Edge
	f    *Forwarding
	next http.Handler
	// tr carries HTTP/1.1 requests; h2c and h2tls those that came in over
	// HTTP/2 (gRPC) to an http:// and an https:// node.
	tr, h2c, h2tls http.RoundTripper
}

// forwardTo sends r to its owner o, one hop, and answers the client with
// o's answer. A 421 (a stale route) is tried once more after the cache
// caught up; with catch, a refusal of o for a reason of its own
// (NodeRefusedHeader), or a connection to o that could not be made, is not
// passed on and forwardTo returns true, for the create to be placed
// elsewhere. counted says whether the caller's rate
// limit was applied to r already; readBody keeps r's body (nil: none) to
// send again, when retry.
func (fw *forwarder) forwardTo(w http.ResponseWriter, r *http.Request, o Owner, who *auth.Identity, id string,
	catch bool, counted *bool, retry bool, readBody func() ([]byte, bool)) (refused bool) {
	e, f, next := fw.e, fw.f, fw.next
	switch {
	case o.Lost && r.Method == http.MethodDelete && SessionOfPath(r.URL.Path) == id && r.URL.Path == "/v1/sessions/"+id && f.ForgetLost != nil:
		// Deleting a lost session removes the fleet's record of it.
		if err := e.limits.allow(who); err != nil {
			e.WriteError(w, r, err)
			return false
		}
		if err := f.ForgetLost(r.Context(), who.Tenant, id); err != nil {
			e.WriteError(w, r, err)
			return false
		}
		w.WriteHeader(http.StatusNoContent)
		return false
	case o.Lost:
		e.WriteError(w, r, errdefs.New(errdefs.ErrNotFound, "session %s was lost with fleet node %s (the node stayed unreachable past the grace period)", id, o.Node))
		return false
	case !o.Alive:
		e.WriteError(w, r, errdefs.WithRetryAfter(errdefs.ErrUnavailable, time.Second, "session %s is on fleet node %s, which is unreachable now", id, o.Node))
		return false
	}
	secret := f.Secret()
	if secret == nil {
		e.WriteError(w, r, errdefs.WithRetryAfter(errdefs.ErrUnavailable, time.Second, "session %s is on fleet node %s, and this node cannot forward yet (no fleet secret)", id, o.Node))
		return false
	}
	// An anonymous request is admitted by the owner, as the key that
	// created the sandbox.
	if who != nil && !*counted {
		if err := e.limits.allow(who); err != nil {
			e.WriteError(w, r, err)
			return false
		}
		*counted = true
	}
	body, ok := readBody()
	if !ok {
		return false
	}
	for attempt := 1; ; attempt++ {
		misdirected, refused := false, false
		target, err := url.Parse(o.Addr)
		if err != nil {
			e.WriteError(w, r, errdefs.New(errdefs.ErrUnavailable, "fleet node %s has a bad address %q", o.Node, o.Addr))
			return false
		}
		rt := fw.tr
		if r.ProtoMajor == 2 && f.Transport == nil {
			rt = fw.h2c
			if target.Scheme == "https" {
				rt = fw.h2tls
			}
		}
		rp := &httputil.ReverseProxy{
			Transport:     rt,
			FlushInterval: -1, // SSE and streams pass through as they come
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(target)
				pr.Out.Host = pr.In.Host
				if who != nil {
					pr.Out.Header.Del("Authorization")
					pr.Out.Header.Del("X-API-Key")
				}
				pr.Out.Header.Set(ForwardHeader, sign(secret, who, pr.Out, f.Node))
				pr.Out.Header.Del(NodeRefusedHeader)
				if body != nil {
					pr.Out.Body = io.NopCloser(bytes.NewReader(body))
					pr.Out.ContentLength = int64(len(body))
				}
			},
			ModifyResponse: func(resp *http.Response) error {
				if resp.StatusCode == http.StatusMisdirectedRequest {
					resp.Body.Close()
					misdirected = true
					return errMisdirected
				}
				if catch && resp.Header.Get(NodeRefusedHeader) != "" {
					resp.Body.Close()
					refused = true
					return errRefused
				}
				resp.Header.Del(NodeRefusedHeader)
				return nil
			},
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				if errors.Is(err, errMisdirected) || errors.Is(err, errRefused) {
					return // the caller tries again
				}
				if op := (*net.OpError)(nil); catch && errors.As(err, &op) && op.Op == "dial" {
					// The node is gone (its entry not yet): the create
					// never reached it, so it may go elsewhere.
					refused = true
					return
				}
				e.WriteError(w, r, errdefs.WithRetryAfter(errdefs.ErrUnavailable, time.Second, "forward to fleet node %s: %v", o.Node, err))
			},
		}
		rp.ServeHTTP(w, r)
		if refused {
			return true
		}
		if !misdirected {
			return false
		}
		if !retry || attempt > 1 {
			e.WriteError(w, r, errdefs.WithRetryAfter(errdefs.ErrUnavailable, time.Second, "session %s: fleet node %s no longer has it and the route has not caught up; try again", id, o.Node))
			return false
		}
		// Give the watch a moment to bring the new route.
		time.Sleep(200 * time.Millisecond)
		if who == nil {
			o = f.locateID(id)
		} else {
			o = f.Locate(who.Tenant, id)
		}
		if o.Known && o.Here {
			// The session came here meanwhile.
			if body != nil {
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
			next.ServeHTTP(w, r)
			return false
		}
		if !o.Known || !o.Alive || o.Lost || o.Moving {
			e.WriteError(w, r, errdefs.WithRetryAfter(errdefs.ErrUnavailable, time.Second, "session %s moved while its request was forwarded; try again", id))
			return false
		}
	}
}

// E2BSandboxHeader names the sandbox an E2B envd request is for, when the
// SDK reaches envd through the API's address rather than the sandbox's
// host.
const E2BSandboxHeader = "E2b-Sandbox-Id"

// e2bEnvdPort is envd's port in E2B's sandbox hosts (49983-<id>.domain).
const e2bEnvdPort = "49983"

// SandboxOfE2BPath returns the sandbox an E2B control-plane path names
// (/e2b/sandboxes/{id}... and /e2b/v2/sandboxes/{id}...), "" otherwise.
func SandboxOfE2BPath(path string) string {
	rest, ok := strings.CutPrefix(path, "/e2b/sandboxes/")
	if !ok {
		if rest, ok = strings.CutPrefix(path, "/e2b/v2/sandboxes/"); !ok {
			return ""
		}
	}
	id, _, _ := strings.Cut(rest, "/")
	return id
}

// placeCreate is where a create of id (maybe "") goes: the owner of an id
// the fleet knows (which answers with the existing session, or 409), this
// node for a lost one (the registry answers 409, saying so), else the node
// placement picks (placed).
func (f *Forwarding) placeCreate(tenant, id string) (o Owner, placed bool) {
	if id != "" {
		o = f.Locate(tenant, id)
	}
	if o.Lost {
		return Owner{}, false
	}
	if !o.Known && f.Place != nil {
		return f.Place(nil), true
	}
	return o, false
}

// locateID is LocateID, or unknown without one.
func (f *Forwarding) locateID(id string) Owner {
	if f.LocateID == nil || id == "" {
		return Owner{}
	}
	return f.LocateID(id)
}

// sessionOfPreviewHost returns the port and session a preview host
// ({port}-{session}.domain, docs/PORTS.md) names, "" for another host.
func sessionOfPreviewHost(host, domain string) (port, id string) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	label, ok := strings.CutSuffix(strings.ToLower(host), "."+strings.ToLower(domain))
	if !ok || strings.Contains(label, ".") {
		return "", ""
	}
	p, id, ok := strings.Cut(label, "-")
	if !ok || p == "" || strings.Trim(p, "0123456789") != "" {
		return "", ""
	}
	return p, id
}

// peekMCP returns the session_id argument of an MCP tools/call in r's
// body ("" for any other message), or the id argument (maybe "") of a
// create_session call with create set, leaving the body to be read again.
func peekMCP(r *http.Request) (id string, create bool, err error) {
	if r.ContentLength > maxRetryBody {
		return "", false, nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxRetryBody+1))
	r.Body = io.NopCloser(bytes.NewReader(b))
	if err != nil {
		return "", false, errdefs.New(errdefs.ErrInvalidArgument, "read the request body: %v", err)
	}
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name      string `json:"name"`
			Arguments struct {
				SessionID string `json:"session_id"`
				ID        string `json:"id"`
			} `json:"arguments"`
		} `json:"params"`
	}
	if json.Unmarshal(b, &msg) != nil || msg.Method != "tools/call" {
		return "", false, nil
	}
	if msg.Params.Name == "create_session" {
		return msg.Params.Arguments.ID, true, nil
	}
	return msg.Params.Arguments.SessionID, false, nil
}

func errorBody(code, msg string) any {
	return map[string]map[string]string{"error": {"code": code, "message": msg}}
}
