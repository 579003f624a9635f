package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/warrenhq/warren/api"
)

// Media types of streamed answers.
const (
	eventStream = "text/event-stream"
	octetStream = "application/octet-stream"
)

// mediaType returns the media type of a response's Content-Type, without
// parameters, in lower case.
func mediaType(resp *http.Response) string {
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil {
		return ""
	}
	return mt
}

// decodeChunk returns the bytes of an output event's data: its text, or the
// bytes of its base64 when they were not UTF-8.
func decodeChunk(data string) (*api.OutputChunk, []byte, error) {
	var c api.OutputChunk
	if err := json.Unmarshal([]byte(data), &c); err != nil {
		return nil, nil, fmt.Errorf("decode output chunk: %w", err)
	}
	if c.Base64 == "" {
		return &c, []byte(c.Text), nil
	}
	b, err := base64.StdEncoding.DecodeString(c.Base64)
	if err != nil {
		return nil, nil, fmt.Errorf("decode base64 of output chunk: %w", err)
	}
	return &c, b, nil
}

// ExecStream runs a command in the session id as Exec does, but streams its
// output: onOutput receives the exact bytes of each chunk of stdout or
// stderr ("stdout" or "stderr") as the command writes them, in order. The
// result is that of Exec with Stdout and Stderr empty (and no base64 forms):
// the output went to onOutput.
//
// An error that onOutput returns ends the call and is returned as is. An
// error the daemon reports after the stream started is an *Error, as is one
// answered before. A nil onOutput discards the output.
//
// A daemon that answers with a plain JSON result instead of a stream is
// handled too: its whole stdout and then its whole stderr go to onOutput.
func (c *Client) ExecStream(ctx context.Context, id string, req *api.ExecRequest, onOutput func(stream string, p []byte) error) (*api.ExecResult, error) {
	if onOutput == nil {
		onOutput = func(string, []byte) error { return nil }
	}
	path := sessionPath(id, "/exec")
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("POST %s: encode request: %w", path, err)
	}
	resp, err := c.send(ctx, &request{
		method: http.MethodPost, path: path, body: bytes.NewReader(b),
		contentType: "application/json", accept: eventStream,
	})
	if err != nil {
		return nil, err
	}
	// Not closeBody: draining a stream that is still open would wait for it.
	defer resp.Body.Close()

	switch mt := mediaType(resp); mt {
	case eventStream:
	case "application/json":
		return execResultAsStream(resp.Body, path, onOutput)
	default:
		return nil, fmt.Errorf("POST %s: answer of type %q, want %s", path, mt, eventStream)
	}

	return readEvents[api.ExecResult](resp.Body, path, "exit", func(ev sseEvent) error {
		if ev.name != "stdout" && ev.name != "stderr" {
			return nil // for newer clients
		}
		_, p, err := decodeChunk(ev.data)
		if err != nil {
			return fmt.Errorf("POST %s: %s event: %w", path, ev.name, err)
		}
		if len(p) == 0 {
			return nil
		}
		return onOutput(ev.name, p)
	})
}

// execResultAsStream hands the output of a plain JSON exec result to
// onOutput and returns the result without it.
func execResultAsStream(body io.Reader, path string, onOutput func(string, []byte) error) (*api.ExecResult, error) {
	var res api.ExecResult
	if err := json.NewDecoder(body).Decode(&res); err != nil {
		return nil, fmt.Errorf("POST %s: decode response: %w", path, err)
	}
	for _, s := range []struct {
		name, text, b64 string
	}{{"stdout", res.Stdout, res.StdoutBase64}, {"stderr", res.Stderr, res.StderrBase64}} {
		p := []byte(s.text)
		if s.b64 != "" {
			var err error
			if p, err = base64.StdEncoding.DecodeString(s.b64); err != nil {
				return nil, fmt.Errorf("POST %s: decode base64 of %s: %w", path, s.name, err)
			}
		}
		if len(p) > 0 {
			if err := onOutput(s.name, p); err != nil {
				return nil, err
			}
		}
	}
	res.Stdout, res.Stderr, res.StdoutBase64, res.StderrBase64 = "", "", "", ""
	return &res, nil
}
