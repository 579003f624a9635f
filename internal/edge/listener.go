package edge

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"

	"github.com/warrenhq/warren/api"
)

// Listener wraps the daemon's listener so that what net/http answers on
// its own, before any handler runs, comes in the error envelope too: a
// malformed request line or header (400), headers over the limit (431),
// a Transfer-Encoding it does not implement (501). net/http writes those
// answers straight to the connection as plain text, in one write of a
// fixed shape (net/http's server.go, "errorHeaders"); the connection
// recognizes that shape and writes the envelope instead, with the same
// status. Everything else passes through untouched.
//
// What this cannot reach: the 417 net/http answers to an Expect header
// other than 100-continue (written through its response writer, with a
// Date header, so it does not match), the "client sent an HTTP request
// to an HTTPS server" answer (TLS only; the daemon serves cleartext), and
// HTTP/2 protocol errors, which are frames (GOAWAY, RST_STREAM), not
// answers with a body.
//
// ln must be a cleartext listener: net/http finds TLS connections by their
// type (*tls.Conn), which the wrapper would hide.
func Listener(ln net.Listener) net.Listener { return envelopeListener{ln} }

type envelopeListener struct{ net.Listener }

func (l envelopeListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &envelopeConn{Conn: c}, nil
}

// envelopeConn is a connection whose net/http error answers are
// rewritten (Listener).
type envelopeConn struct{ net.Conn }

// plainAnswer is the shape of net/http's own error answers: a status
// line, exactly these two headers, and a one-line text body.
var plainAnswer = regexp.MustCompile(`\AHTTP/1\.1 ([0-9]{3}) [^\r\n]*\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n([^\r\n]*)\z`)

func (c *envelopeConn) Write(p []byte) (int, error) {
	if len(p) > 1024 || !bytes.HasPrefix(p, []byte("HTTP/1.1 ")) {
		return c.Conn.Write(p)
	}
	m := plainAnswer.FindSubmatch(p)
	if m == nil {
		return c.Conn.Write(p)
	}
	if _, err := c.Conn.Write(envelopeAnswer(m[1], m[2])); err != nil {
		return 0, err
	}
	return len(p), nil
}

// envelopeAnswer is the enveloped form of net/http's answer with status
// code and body text.
func envelopeAnswer(code, text []byte) []byte {
	status, _ := strconv.Atoi(string(code))
	msg := string(text)
	// net/http's text starts with the status ("400 Bad Request: missing
	// required Host header"); the envelope's code says that already.
	if rest, ok := bytes.CutPrefix(text, append(append([]byte{}, code...), ' ')); ok {
		msg = string(rest)
	}
	msg = "the HTTP request was refused before it was routed: " + msg
	body, _ := json.Marshal(api.Error{Error: api.ErrorBody{Code: classOfStatus(status).String(), Message: msg}})
	body = append(body, '\n')
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) + "\r\n")
	b.WriteString("Content-Type: application/json\r\nConnection: close\r\n")
	b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n")
	b.Write(body)
	return b.Bytes()
}

// CloseWrite lets net/http half-close the connection (it does before
// closing after a 431, so the client reads the answer).
func (c *envelopeConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// ReadFrom keeps sendfile for files served from disk: the bytes it moves
// are bodies, never net/http's own answers.
func (c *envelopeConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(c.Conn, r)
}
