package edge

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// maxPeek bounds what the router reads of a gRPC or Connect message to
// find its session: the id is field 1, which protobuf encoders write
// first, so a prefix holds it.
const maxPeek = 4 << 10

// rpcCreate is the gRPC and Connect procedure that creates a session;
// rpcRun runs a command in a fresh sandbox (its field 1 is the image; the
// sandbox is gone when the call ends, so it is served where it came in).
const (
	rpcCreate = "/warren.v1.SessionService/CreateSession"
	rpcRun    = "/warren.v1.ExecService/Run"
)

// peekRPC returns the session a gRPC or Connect call's first message names
// (field 1, session_id, of every request that acts on a session; id of a
// CreateSessionRequest), leaving the body to be read again from its start.
// It reads at most the first message's envelope and maxPeek bytes of it
// (a client sends whole messages, so this never waits on a stream's next
// one) and gives up ("") on a compressed message, an unknown content type
// or a body it cannot parse: the call is then served here.
func peekRPC(r *http.Request) string {
	ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	ct = strings.TrimSpace(strings.ToLower(ct))
	var enveloped, isJSON bool
	switch ct {
	case "application/grpc", "application/grpc+proto", "application/connect+proto":
		enveloped = true
	case "application/connect+json", "application/grpc+json":
		enveloped, isJSON = true, true
	case "application/proto":
	case "application/json":
		isJSON = true
	default:
		return ""
	}
	var read []byte
	defer func() { r.Body = readerCloser{io.MultiReader(bytes.NewReader(read), r.Body), r.Body} }()
	limit := maxPeek
	if isJSON {
		limit = maxRetryBody
	}
	n := limit
	if enveloped {
		head := make([]byte, 5)
		if _, err := io.ReadFull(r.Body, head); err != nil {
			read = head
			return ""
		}
		read = head
		if head[0]&1 != 0 { // compressed
			return ""
		}
		n = min(int(binary.BigEndian.Uint32(head[1:])), limit)
	} else if r.ContentLength >= 0 {
		n = min(int(r.ContentLength), limit)
	}
	msg := make([]byte, n)
	got, _ := io.ReadFull(r.Body, msg)
	msg = msg[:got]
	read = append(read, msg...)
	if isJSON {
		// JSON needs the whole message: a prefix is enough only when
		// it is all of it.
		if got < n || (enveloped && got < int(binary.BigEndian.Uint32(read[1:5]))) || (!enveloped && int64(got) != r.ContentLength) {
			return ""
		}
		var m struct {
			SessionID  string `json:"sessionId"`
			SessionID2 string `json:"session_id"`
			ID         string `json:"id"`
		}
		if json.Unmarshal(msg, &m) != nil {
			return ""
		}
		if r.URL.Path == rpcCreate {
			return m.ID
		}
		if m.SessionID != "" {
			return m.SessionID
		}
		return m.SessionID2
	}
	for len(msg) > 0 {
		num, typ, l := protowire.ConsumeTag(msg)
		if l < 0 {
			return ""
		}
		msg = msg[l:]
		if num == 1 {
			if typ != protowire.BytesType {
				return ""
			}
			v, l := protowire.ConsumeBytes(msg)
			if l < 0 {
				return ""
			}
			return string(v)
		}
		l = protowire.ConsumeFieldValue(num, typ, msg)
		if l < 0 {
			return ""
		}
		msg = msg[l:]
	}
	return ""
}

// readerCloser reads from one reader and closes another (the body it
// stands in front of).
type readerCloser struct {
	io.Reader
	c io.Closer
}

func (rc readerCloser) Close() error { return rc.c.Close() }
