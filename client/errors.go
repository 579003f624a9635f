package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/warrenhq/warren/api"
)

// Error is an error answered by the daemon (or by something in front of it,
// such as a proxy): a status other than 2xx.
type Error struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Code is the envelope's class, such as "not_found". When the body was
	// not an envelope it is derived from the status.
	Code string
	// Message is the envelope's sentence, or a summary of a body that was
	// not an envelope.
	Message string
	// RetryAfter is how long the daemon asked the client to wait before
	// retrying (the Retry-After header), or 0.
	RetryAfter time.Duration
	// RequestID is the daemon's id of the request (the X-Request-ID
	// header), the key to its access log and audit record; "" when the
	// answer came from something in front of the daemon. The Python and
	// TypeScript SDKs carry it too (docs/SDK.md).
	RequestID string
}

// Error returns "code: message".
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Code + ": " + e.Message
}

// Code returns the class of err if it is (or wraps) an *Error, such as
// "not_found" or "resource_exhausted", and "" otherwise.
func Code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// IsNotFound reports whether err says that the session, file or image does
// not exist.
func IsNotFound(err error) bool {
	return Code(err) == "not_found"
}

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// errorFromResponse builds the *Error of a response whose status is not 2xx.
// It does not close the body.
func errorFromResponse(resp *http.Response) *Error {
	e := &Error{
		StatusCode: resp.StatusCode,
		RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()),
		RequestID:  resp.Header.Get("X-Request-ID"),
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var env api.Error
	if err := json.Unmarshal(body, &env); err == nil && env.Error.Code != "" {
		e.Code, e.Message = env.Error.Code, env.Error.Message
		return e
	}
	e.Code = codeOfStatus(resp.StatusCode)
	e.Message = summarize(resp.StatusCode, resp.Header.Get("Content-Type"), body)
	return e
}

// codeOfStatus maps a status to the class the daemon would have used.
func codeOfStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_argument"
	case http.StatusUnauthorized:
		return "unauthenticated"
	case http.StatusForbidden:
		return "permission_denied"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusConflict:
		return "conflict"
	case http.StatusRequestEntityTooLarge:
		return "too_large"
	case http.StatusTooManyRequests:
		return "resource_exhausted"
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return "unavailable"
	}
	if status >= 500 {
		return "internal"
	}
	return "unknown"
}

// statusOfCode maps a class to the status the daemon answers it with, for
// errors that arrive without one (an "error" event of a stream that had
// already started with 200).
func statusOfCode(code string) int {
	switch code {
	case "invalid_argument":
		return http.StatusBadRequest
	case "unauthenticated":
		return http.StatusUnauthorized
	case "permission_denied":
		return http.StatusForbidden
	case "not_found":
		return http.StatusNotFound
	case "conflict":
		return http.StatusConflict
	case "too_large":
		return http.StatusRequestEntityTooLarge
	case "resource_exhausted":
		return http.StatusTooManyRequests
	case "unavailable":
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// errorFromEvent builds the *Error of an "error" event, whose data is the
// error envelope.
func errorFromEvent(data string) *Error {
	var env api.Error
	if err := json.Unmarshal([]byte(data), &env); err != nil || env.Error.Code == "" {
		return &Error{StatusCode: http.StatusInternalServerError, Code: "internal",
			Message: "the daemon reported an error that is not an envelope: " + summarizeEvent(data)}
	}
	return &Error{StatusCode: statusOfCode(env.Error.Code), Code: env.Error.Code, Message: env.Error.Message}
}

// summarizeEvent shortens an event's data for a message.
func summarizeEvent(data string) string {
	data = strings.Join(strings.Fields(data), " ")
	if len(data) > maxMessage {
		data = strings.ToValidUTF8(data[:maxMessage], "") + "…"
	}
	return data
}

// maxMessage bounds the length of a message made from a body.
const maxMessage = 200

// summarize makes a message from a body that is not an error envelope: a
// proxy's HTML page, plain text, or nothing.
func summarize(status int, contentType string, body []byte) string {
	head := fmt.Sprintf("HTTP %d %s", status, http.StatusText(status))
	text := string(body)
	if mt, _, _ := mime.ParseMediaType(contentType); mt == "text/html" || strings.HasPrefix(strings.TrimSpace(text), "<") {
		text = htmlText(text)
	}
	text = strings.Join(strings.Fields(text), " ")
	if len(text) > maxMessage {
		text = strings.ToValidUTF8(text[:maxMessage], "") + "…"
	}
	if text == "" || strings.EqualFold(text, head) || strings.EqualFold(text, fmt.Sprintf("%d %s", status, http.StatusText(status))) {
		return head
	}
	return head + ": " + text
}

// htmlText returns the title of an HTML page, or else its text without tags.
func htmlText(page string) string {
	lower := strings.ToLower(page)
	if i := strings.Index(lower, "<title"); i >= 0 {
		if j := strings.IndexByte(lower[i:], '>'); j >= 0 {
			start := i + j + 1
			if k := strings.Index(lower[start:], "</title>"); k >= 0 {
				return page[start : start+k]
			}
		}
	}
	var b strings.Builder
	inTag := false
	for _, r := range page {
		switch {
		case r == '<':
			inTag = true
		case r == '>' && inTag:
			inTag = false
			b.WriteByte(' ')
		case !inTag:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// maxRetryAfter bounds a Retry-After in seconds, against overflow.
const maxRetryAfter = 1 << 31

// parseRetryAfter parses a Retry-After header: seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return 0
		}
		s = min(s, maxRetryAfter)
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}
