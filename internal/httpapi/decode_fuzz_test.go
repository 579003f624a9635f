package httpapi

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/wire"
)

// FuzzDecodeJSON drives the JSON decoding every REST body goes through,
// and the conversions behind it, with arbitrary bytes. `go test` runs the
// seeds below (the cases the reliability run found); `go test -fuzz
// FuzzDecodeJSON ./internal/httpapi` searches further. It checks that:
//   - nothing panics;
//   - a refusal is invalid_argument (400), never an internal error;
//   - what is accepted is exactly one JSON object, with nothing after it
//     (a complete object followed by a truncated one is refused);
//   - a duration accepted in seconds or milliseconds never wraps around
//     into a shorter or negative one.
func FuzzDecodeJSON(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, ` {} `, `null`, `[]`, `"x"`, `1`, `{`, `}`,
		`{"command":"x"}`,
		`{"command":"x"}{"comm`,
		`{"command":"x"} x`,
		`{"command":"x"}` + "\n\n",
		`{"command":"x"`,
		`{"command":"x","timeout_ms":18446744073710}`,
		`{"command":"x","timeout_ms":9223372036854775807}`,
		`{"command":"x","timeout_ms":9223372036854775808}`,
		`{"command":"x","timeout_ms":-1}`,
		`{"command":"x","timeout_ms":1e3}`,
		`{"command":"x","timeout_ms":"5"}`,
		`{"ttl_seconds":18446744074}`,
		`{"ttl_seconds":9223372036854775807,"max_lifetime_seconds":-9223372036854775808}`,
		`{"argv":["a",1]}`,
		`{"env":{"A":null}}`,
		`{"stdin_base64":"!!"}`,
		`{"unknown":1}`,
		`{"command":"x","command":"y"}`,
		"\xef\xbb\xbf{}",
		`{"limits":{"memory_mb":1e400}}`,
		`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(what string, v any, err error) {
			if err == nil {
				if body := bytes.TrimSpace(b); len(body) > 0 && (body[0] != '{' || !json.Valid(body)) {
					t.Fatalf("%s: accepted %q, which is not one JSON object", what, b)
				}
				return
			}
			if c := errdefs.ClassOf(err); c != errdefs.ErrInvalidArgument {
				t.Fatalf("%s: %q refused as %s, not invalid_argument: %v", what, b, c, err)
			}
		}
		var ex api.ExecRequest
		err := decodeJSONBytes(b, &ex, true)
		check("exec", &ex, err)
		if err == nil {
			if req, err := wire.ExecRequest(&ex); err == nil {
				if (ex.TimeoutMs > 0) != (req.Timeout > 0) || (ex.TimeoutMs < 0) != (req.Timeout < 0) {
					t.Fatalf("timeout_ms %d became %v", ex.TimeoutMs, req.Timeout)
				}
			} else if errdefs.ClassOf(err) != errdefs.ErrInvalidArgument {
				t.Fatalf("wire.ExecRequest(%+v): %v", ex, err)
			}
		}
		var cr api.CreateSessionRequest
		err = decodeJSONBytes(b, &cr, true)
		check("create", &cr, err)
		if err == nil {
			for _, n := range []int64{cr.TTLSeconds, cr.MaxLifetimeSeconds} {
				if d := wire.Seconds(n); (n > 0) != (d > 0) || (n < 0) != (d < 0) || (n > 0 && d < wire.Seconds(n-1)) {
					t.Fatalf("%d seconds became %v", n, d)
				}
			}
		}
		var sp api.StartProcessRequest
		check("process", &sp, decodeJSONBytes(b, &sp, false))
	})
}
