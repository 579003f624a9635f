package api

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// OpenAPIYAML is the OpenAPI 3.0 document of the REST API (openapi.yaml),
// served at /openapi.yaml. It must not be modified.
//
//go:embed openapi.yaml
var OpenAPIYAML []byte

// OpenAPIJSON returns the OpenAPI document converted to JSON, as served at
// /openapi.json.
func OpenAPIJSON() ([]byte, error) {
	doc, err := decodeOpenAPI()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encode openapi document as json: %w", err)
	}
	return b, nil
}

// isOperation reports whether key of an OpenAPI path item names an
// operation (an HTTP method).
func isOperation(key string) bool {
	switch key {
	case "get", "put", "post", "delete", "options", "head", "patch", "trace":
		return true
	}
	return false
}

// WebSocketKey is the key of a path item that documents a WebSocket: an
// operation object with the upgrade request's method, kept out of the
// operations so that generated HTTP clients get no function that cannot
// work.
const WebSocketKey = "x-websocket"

// OpenAPIRoutes returns every operation of the OpenAPI document as
// "METHOD /path" (such as "GET /v1/sessions/{id}"), sorted, with the
// WebSockets (WebSocketKey) among them.
func OpenAPIRoutes() ([]string, error) {
	var doc struct {
		Paths map[string]map[string]yaml.Node `yaml:"paths"`
	}
	if err := yaml.Unmarshal(OpenAPIYAML, &doc); err != nil {
		return nil, fmt.Errorf("parse openapi document: %w", err)
	}
	var routes []string
	for p, item := range doc.Paths {
		for key, n := range item {
			switch {
			case isOperation(key):
				routes = append(routes, strings.ToUpper(key)+" "+p)
			case key == WebSocketKey:
				var ws struct {
					Method string `yaml:"method"`
				}
				if err := n.Decode(&ws); err != nil || !isOperation(ws.Method) {
					return nil, fmt.Errorf("openapi document: %s of %s has no method", WebSocketKey, p)
				}
				routes = append(routes, strings.ToUpper(ws.Method)+" "+p)
			}
		}
	}
	sort.Strings(routes)
	return routes, nil
}

// decodeOpenAPI decodes the YAML document into JSON-compatible values.
func decodeOpenAPI() (any, error) {
	var doc any
	if err := yaml.Unmarshal(OpenAPIYAML, &doc); err != nil {
		return nil, fmt.Errorf("parse openapi document: %w", err)
	}
	return jsonCompatible(doc)
}

// jsonCompatible converts what yaml decodes into interface values to what
// encoding/json can encode: maps with non-string keys (such as the status
// codes of responses, when unquoted) get string keys.
func jsonCompatible(v any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			c, err := jsonCompatible(e)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			ks, ok := k.(string)
			if !ok {
				switch k.(type) {
				case int, int64, uint64, bool, float64:
					ks = fmt.Sprint(k)
				default:
					return nil, fmt.Errorf("openapi document has a map key of type %T", k)
				}
			}
			if _, dup := out[ks]; dup {
				return nil, fmt.Errorf("openapi document has the map key %q twice", ks)
			}
			c, err := jsonCompatible(e)
			if err != nil {
				return nil, err
			}
			out[ks] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			c, err := jsonCompatible(e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	default:
		return v, nil
	}
}
