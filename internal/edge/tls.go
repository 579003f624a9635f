package edge

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"

	"github.com/warrenhq/warren/api"
)

// TLSListener serves TLS on ln with cfg, under Listener's envelope: the
// daemon terminates TLS itself and hands net/http the decrypted stream, so
// that net/http's own error answers are rewritten into the envelope as on
// cleartext (a *tls.Conn given to net/http could not be wrapped: it finds
// TLS connections by their type). net/http then sees a cleartext
// connection and speaks what the client speaks on it: HTTP/1.1, or HTTP/2
// when ALPN chose "h2" (the client then starts with HTTP/2's preface,
// which the daemon's cleartext HTTP/2 takes). The server's ConnContext must
// be TLSConnContext and its handler wrapped in TLSRequests, so that
// handlers see r.TLS as usual (secure cookies).
//
// A client that speaks plain HTTP to the TLS port gets a 400 in the
// envelope, in clear, saying so (net/http's own answer to that case).
func TLSListener(ln net.Listener, cfg *tls.Config) net.Listener {
	cfg = cfg.Clone()
	cfg.NextProtos = []string{"h2", "http/1.1"}
	if cfg.MinVersion == 0 {
		cfg.MinVersion = tls.VersionTLS12
	}
	return tlsListener{ln, cfg}
}

type tlsListener struct {
	net.Listener
	cfg *tls.Config
}

func (l tlsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	// The handshake runs on the connection's first read, in net/http's
	// goroutine for it, under its read deadline: a slow client holds
	// nothing else up.
	return &tlsConn{envelopeConn{Conn: tls.Server(c, l.cfg)}}, nil
}

// tlsConn is a server-side TLS connection under the envelope.
type tlsConn struct{ envelopeConn }

func (c *tlsConn) Read(p []byte) (int, error) {
	n, err := c.envelopeConn.Read(p)
	var re tls.RecordHeaderError
	if err != nil && errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader) {
		// Plain HTTP on the TLS port: answered in clear, as net/http
		// answers it when it handles TLS itself.
		body, _ := json.Marshal(api.Error{Error: api.ErrorBody{Code: classOfStatus(http.StatusBadRequest).String(),
			Message: "this port serves HTTPS: the client sent a plain HTTP request; use https://"}})
		var b bytes.Buffer
		b.WriteString("HTTP/1.0 400 Bad Request\r\nContent-Type: application/json\r\nConnection: close\r\n")
		b.WriteString("Content-Length: " + strconv.Itoa(len(body)+1) + "\r\n\r\n")
		b.Write(body)
		b.WriteByte('\n')
		_, _ = re.Conn.Write(b.Bytes()) // the connection closes after this either way
	}
	return n, err
}

// looksLikeHTTP reports whether a TLS record header is the start of an
// HTTP/1 request line instead.
func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO", "DELET", "PATCH", "CONNE":
		return true
	}
	return false
}

// tlsConnKey holds the TLS connection a request came over.
type tlsConnKey struct{}

// TLSConnContext is the http.Server's ConnContext with TLSListener: it
// keeps each connection's TLS state reachable from its requests.
func TLSConnContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tlsConn); ok {
		return context.WithValue(ctx, tlsConnKey{}, tc.Conn.(*tls.Conn))
	}
	return ctx
}

// TLSRequests sets r.TLS on requests that came over TLSListener, as
// net/http does for connections it handles TLS on itself.
func TLSRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tc, ok := r.Context().Value(tlsConnKey{}).(*tls.Conn); ok && r.TLS == nil {
			st := tc.ConnectionState()
			r.TLS = &st
		}
		next.ServeHTTP(w, r)
	})
}
