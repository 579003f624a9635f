package api

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.yaml.in/yaml/v3"
)

// schema is the part of an OpenAPI schema object the tests look at.
type schema struct {
	Type                 string             `yaml:"type"`
	Format               string             `yaml:"format"`
	Ref                  string             `yaml:"$ref"`
	Items                *schema            `yaml:"items"`
	AdditionalProperties *schema            `yaml:"additionalProperties"`
	Properties           map[string]*schema `yaml:"properties"`
	Required             []string           `yaml:"required"`
}

type parameter struct {
	Ref      string `yaml:"$ref"`
	Name     string `yaml:"name"`
	In       string `yaml:"in"`
	Required bool   `yaml:"required"`
}

type response struct {
	Ref     string                             `yaml:"$ref"`
	Content map[string]struct{ Schema schema } `yaml:"content"`
}

type operation struct {
	OperationID string                            `yaml:"operationId"`
	Summary     string                            `yaml:"summary"`
	Description string                            `yaml:"description"`
	Parameters  []parameter                       `yaml:"parameters"`
	Responses   map[string]response               `yaml:"responses"`
	Security    *[]map[string][]any               `yaml:"security"`
	RequestBody *struct{ Content map[string]any } `yaml:"requestBody"`
}

type document struct {
	OpenAPI string `yaml:"openapi"`
	Info    struct {
		Version string `yaml:"version"`
	} `yaml:"info"`
	Paths      map[string]map[string]yaml.Node `yaml:"paths"`
	Components struct {
		Schemas    map[string]*schema   `yaml:"schemas"`
		Parameters map[string]parameter `yaml:"parameters"`
		Responses  map[string]response  `yaml:"responses"`
	} `yaml:"components"`
}

func loadDocument(t *testing.T) *document {
	t.Helper()
	var doc document
	dec := yaml.NewDecoder(bytes.NewReader(OpenAPIYAML))
	dec.KnownFields(false)
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("parse openapi.yaml: %v", err)
	}
	return &doc
}

// operations returns the document's operations by "METHOD /path", with the
// path item's parameters prepended to each operation's.
func operations(t *testing.T, doc *document) map[string]operation {
	t.Helper()
	ops := make(map[string]operation)
	for p, item := range doc.Paths {
		var common []parameter
		if n, ok := item["parameters"]; ok {
			if err := n.Decode(&common); err != nil {
				t.Fatalf("decode parameters of %s: %v", p, err)
			}
		}
		for key, n := range item {
			method := key
			if key == WebSocketKey {
				// Checked as the GET operation it documents.
				var ws struct {
					Method string `yaml:"method"`
				}
				n.Decode(&ws)
				method = ws.Method
			} else if !isOperation(key) {
				continue
			}
			var op operation
			if err := n.Decode(&op); err != nil {
				t.Fatalf("decode %s %s: %v", key, p, err)
			}
			op.Parameters = append(append([]parameter(nil), common...), op.Parameters...)
			ops[strings.ToUpper(method)+" "+p] = op
		}
	}
	return ops
}

func TestOpenAPIParses(t *testing.T) {
	doc := loadDocument(t)
	if doc.OpenAPI != "3.0.3" {
		t.Errorf("openapi = %q, want 3.0.3", doc.OpenAPI)
	}
	if doc.Info.Version != "v1" {
		t.Errorf("info.version = %q, want v1", doc.Info.Version)
	}
}

func TestOpenAPIJSONRoundTrip(t *testing.T) {
	b, err := OpenAPIJSON()
	if err != nil {
		t.Fatalf("OpenAPIJSON() error: %v", err)
	}
	var fromJSON any
	if err := json.Unmarshal(b, &fromJSON); err != nil {
		t.Fatalf("OpenAPIJSON() is not valid JSON: %v", err)
	}
	again, err := json.Marshal(fromJSON)
	if err != nil {
		t.Fatalf("re-encode: %v", err)
	}
	if !bytes.Equal(again, b) {
		t.Errorf("OpenAPIJSON() does not round-trip through encoding/json")
	}

	// The JSON holds the same document as the YAML: decode the YAML the
	// same way, push it through JSON once, and compare.
	fromYAML, err := decodeOpenAPI()
	if err != nil {
		t.Fatalf("decodeOpenAPI() error: %v", err)
	}
	yb, err := json.Marshal(fromYAML)
	if err != nil {
		t.Fatalf("encode yaml document: %v", err)
	}
	var want any
	if err := json.Unmarshal(yb, &want); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if diff := cmp.Diff(want, fromJSON); diff != "" {
		t.Errorf("OpenAPIJSON() differs from openapi.yaml (-yaml +json):\n%s", diff)
	}

	doc := fromJSON.(map[string]any)
	if got := doc["info"].(map[string]any)["version"]; got != "v1" {
		t.Errorf("json info.version = %v, want v1", got)
	}
	// Status codes are string keys in JSON.
	resp := doc["paths"].(map[string]any)["/v1/sessions"].(map[string]any)["post"].(map[string]any)["responses"].(map[string]any)
	if _, ok := resp["201"]; !ok {
		t.Errorf("json POST /v1/sessions responses have no \"201\" key: %v", resp)
	}
}

func TestJSONCompatibleKeys(t *testing.T) {
	in := map[any]any{200: "ok", "x": []any{map[any]any{true: 1}}}
	got, err := jsonCompatible(in)
	if err != nil {
		t.Fatalf("jsonCompatible() error: %v", err)
	}
	want := map[string]any{"200": "ok", "x": []any{map[string]any{"true": 1}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("jsonCompatible() mismatch (-want +got):\n%s", diff)
	}
	if _, err := jsonCompatible(map[any]any{1: "a", "1": "b"}); err == nil {
		t.Errorf("jsonCompatible() with duplicate keys: no error")
	}
}

func TestOpenAPIRoutes(t *testing.T) {
	got, err := OpenAPIRoutes()
	if err != nil {
		t.Fatalf("OpenAPIRoutes() error: %v", err)
	}
	want := []string{
		"DELETE /v1/images/{name}",
		"DELETE /v1/keys/{key_id}",
		"DELETE /v1/sessions/{id}",
		"DELETE /v1/sessions/{id}/files",
		"DELETE /v1/sessions/{id}/processes/{pid}",
		"DELETE /v1/snapshots/{name}",
		"DELETE /v1/tenants/{name}",
		"DELETE /v1/workspaces/{name}",
		"GET /healthz",
		"GET /metrics",
		"GET /openapi.json",
		"GET /openapi.yaml",
		"GET /readyz",
		"GET /v1/audit",
		"GET /v1/images",
		"GET /v1/images/{name}",
		"GET /v1/keys",
		"GET /v1/sessions",
		"GET /v1/sessions/{id}",
		"GET /v1/sessions/{id}/archive",
		"GET /v1/sessions/{id}/files",
		"GET /v1/sessions/{id}/files/list",
		"GET /v1/sessions/{id}/files/stat",
		"GET /v1/sessions/{id}/network",
		"GET /v1/sessions/{id}/network/denials",
		"GET /v1/sessions/{id}/port-forward/{port}",
		"GET /v1/sessions/{id}/ports",
		"GET /v1/sessions/{id}/processes",
		"GET /v1/sessions/{id}/processes/{pid}",
		"GET /v1/sessions/{id}/processes/{pid}/output",
		"GET /v1/sessions/{id}/shell",
		"GET /v1/snapshots",
		"GET /v1/snapshots/{name}",
		"GET /v1/snapshots/{name}/export",
		"GET /v1/stats",
		"GET /v1/tenants",
		"GET /v1/tenants/{name}",
		"GET /v1/workspaces",
		"GET /v1/workspaces/{name}",
		"PATCH /v1/sessions/{id}/network",
		"POST /v1/images",
		"POST /v1/images/prune",
		"POST /v1/images/pull",
		"POST /v1/keys",
		"POST /v1/run",
		"POST /v1/sessions",
		"POST /v1/sessions/{id}/exec",
		"POST /v1/sessions/{id}/files/mkdir",
		"POST /v1/sessions/{id}/fork",
		"POST /v1/sessions/{id}/processes",
		"POST /v1/sessions/{id}/processes/{pid}/resize",
		"POST /v1/sessions/{id}/processes/{pid}/signal",
		"POST /v1/sessions/{id}/processes/{pid}/stdin",
		"POST /v1/sessions/{id}/snapshot",
		"POST /v1/tokens",
		"POST /v1/workspaces",
		"PUT /v1/sessions/{id}/archive",
		"PUT /v1/sessions/{id}/files",
		"PUT /v1/sessions/{id}/ports/{port}",
		"PUT /v1/snapshots/{name}/import",
		"PUT /v1/tenants/{name}",
	}
	if len(want) != 61 {
		t.Fatalf("the route list has %d routes, want the 61 the daemon serves", len(want))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("OpenAPIRoutes() mismatch (-want +got):\n%s", diff)
	}
	if !sort.StringsAreSorted(got) {
		t.Errorf("OpenAPIRoutes() is not sorted: %q", got)
	}
}

// goTypes maps every schema of the document to the Go type it mirrors.
var goTypes = map[string]reflect.Type{
	"Limits":               reflect.TypeFor[Limits](),
	"CreateSessionRequest": reflect.TypeFor[CreateSessionRequest](),
	"Usage":                reflect.TypeFor[Usage](),
	"NetworkPolicy":        reflect.TypeFor[NetworkPolicy](),
	"NetworkDenial":        reflect.TypeFor[NetworkDenial](),
	"NetworkDenials":       reflect.TypeFor[NetworkDenials](),
	"Session":              reflect.TypeFor[Session](),
	"SessionList":          reflect.TypeFor[SessionList](),
	"ExecRequest":          reflect.TypeFor[ExecRequest](),
	"RunRequest":           reflect.TypeFor[RunRequest](),
	"ExecResult":           reflect.TypeFor[ExecResult](),
	"FileEntry":            reflect.TypeFor[FileEntry](),
	"FileList":             reflect.TypeFor[FileList](),
	"FileWritten":          reflect.TypeFor[FileWritten](),
	"Image":                reflect.TypeFor[Image](),
	"ImageList":            reflect.TypeFor[ImageList](),
	"PullImageRequest":     reflect.TypeFor[PullImageRequest](),
	"PullProgress":         reflect.TypeFor[PullProgress](),
	"ImagePruneResult":     reflect.TypeFor[ImagePruneResult](),
	"Stats":                reflect.TypeFor[Stats](),
	"Error":                reflect.TypeFor[Error](),
	"ErrorBody":            reflect.TypeFor[ErrorBody](),
	"StartProcessRequest":  reflect.TypeFor[StartProcessRequest](),
	"Process":              reflect.TypeFor[Process](),
	"ProcessList":          reflect.TypeFor[ProcessList](),
	"SignalRequest":        reflect.TypeFor[SignalRequest](),
	"ResizeRequest":        reflect.TypeFor[ResizeRequest](),
	"StdinWritten":         reflect.TypeFor[StdinWritten](),
	"OutputChunk":          reflect.TypeFor[OutputChunk](),
	"OutputGap":            reflect.TypeFor[OutputGap](),
	"ProcessExit":          reflect.TypeFor[ProcessExit](),
	"ShellMessage":         reflect.TypeFor[ShellMessage](),
	"CreateKeyRequest":     reflect.TypeFor[CreateKeyRequest](),
	"Key":                  reflect.TypeFor[Key](),
	"KeyCreated":           reflect.TypeFor[KeyCreated](),
	"KeyList":              reflect.TypeFor[KeyList](),
	"TokenRequest":         reflect.TypeFor[TokenRequest](),
	"Token":                reflect.TypeFor[Token](),
	"TenantQuota":          reflect.TypeFor[TenantQuota](),
	"TenantPolicy":         reflect.TypeFor[TenantPolicy](),
	"TenantNetwork":        reflect.TypeFor[TenantNetwork](),
	"Port":                 reflect.TypeFor[Port](),
	"PortList":             reflect.TypeFor[PortList](),
	"PortUpdate":           reflect.TypeFor[PortUpdate](),
	"Tenant":               reflect.TypeFor[Tenant](),
	"TenantList":           reflect.TypeFor[TenantList](),
	"AuditRecord":          reflect.TypeFor[AuditRecord](),
	"AuditList":            reflect.TypeFor[AuditList](),

	// Workspaces, snapshots and fork.
	"CreateWorkspaceRequest": reflect.TypeFor[CreateWorkspaceRequest](),
	"Workspace":              reflect.TypeFor[Workspace](),
	"WorkspaceMount":         reflect.TypeFor[WorkspaceMount](),
	"WorkspaceList":          reflect.TypeFor[WorkspaceList](),
	"SnapshotRequest":        reflect.TypeFor[SnapshotRequest](),
	"Snapshot":               reflect.TypeFor[Snapshot](),
	"SnapshotList":           reflect.TypeFor[SnapshotList](),
	"ForkRequest":            reflect.TypeFor[ForkRequest](),
	"ForkResult":             reflect.TypeFor[ForkResult](),
}

// schemasWithoutGoType are schemas that no type of types.go mirrors.
var schemasWithoutGoType = map[string]bool{
	"Health": true, // {"status": "ok"} of /healthz and /readyz
}

// jsonField is one JSON property of a Go struct.
type jsonField struct {
	typ      reflect.Type
	required bool // no omitempty
}

// jsonFields returns the JSON properties of struct type t, with the fields
// of embedded structs flattened as encoding/json does.
func jsonFields(t reflect.Type) map[string]jsonField {
	fields := make(map[string]jsonField)
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for n, jf := range jsonFields(f.Type) {
				fields[n] = jf
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = jsonField{typ: f.Type, required: !strings.Contains(","+opts+",", ",omitempty,")}
	}
	return fields
}

// schemaNameOf returns the schema name of a struct type of this package.
func schemaNameOf(t reflect.Type) string {
	for name, gt := range goTypes {
		if gt == t {
			return name
		}
	}
	return ""
}

// checkType reports how s does not describe Go type t.
func checkType(t reflect.Type, s *schema) []string {
	if s == nil {
		return []string{"no schema"}
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	want := func(typ, format string) []string {
		var probs []string
		if s.Type != typ {
			probs = append(probs, "type "+s.Type+", want "+typ)
		}
		if format != "" && s.Format != format {
			probs = append(probs, "format "+s.Format+", want "+format)
		}
		return probs
	}
	if t == reflect.TypeFor[time.Time]() {
		return want("string", "date-time")
	}
	switch t.Kind() {
	case reflect.String:
		return want("string", "")
	case reflect.Bool:
		return want("boolean", "")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return want("integer", "")
	case reflect.Float32, reflect.Float64:
		return want("number", "")
	case reflect.Slice:
		if probs := want("array", ""); probs != nil {
			return probs
		}
		return checkType(t.Elem(), s.Items)
	case reflect.Map:
		if probs := want("object", ""); probs != nil {
			return probs
		}
		return checkType(t.Elem(), s.AdditionalProperties)
	case reflect.Struct:
		name := schemaNameOf(t)
		if name == "" {
			return []string{"Go type " + t.String() + " has no schema"}
		}
		if s.Ref != "#/components/schemas/"+name {
			return []string{"$ref " + s.Ref + ", want #/components/schemas/" + name}
		}
		return nil
	}
	return []string{"unexpected Go kind " + t.Kind().String()}
}

func TestOpenAPISchemasMirrorGoTypes(t *testing.T) {
	doc := loadDocument(t)
	for name := range doc.Components.Schemas {
		if goTypes[name] == nil && !schemasWithoutGoType[name] {
			t.Errorf("schema %s mirrors no Go type: add it to goTypes", name)
		}
	}
	for name, gt := range goTypes {
		t.Run(name, func(t *testing.T) {
			s := doc.Components.Schemas[name]
			if s == nil {
				t.Fatalf("no schema %s for Go type %s", name, gt)
			}
			if s.Type != "object" {
				t.Errorf("schema %s has type %q, want object", name, s.Type)
			}
			fields := jsonFields(gt)
			var goNames, schemaNames []string
			for n := range fields {
				goNames = append(goNames, n)
			}
			for n := range s.Properties {
				schemaNames = append(schemaNames, n)
			}
			sort.Strings(goNames)
			sort.Strings(schemaNames)
			if diff := cmp.Diff(goNames, schemaNames); diff != "" {
				t.Fatalf("properties of %s differ from the json tags of %s (-go +schema):\n%s", name, gt, diff)
			}
			var goRequired []string
			for n, f := range fields {
				if f.required {
					goRequired = append(goRequired, n)
				}
			}
			schemaRequired := append([]string(nil), s.Required...)
			sort.Strings(goRequired)
			sort.Strings(schemaRequired)
			if diff := cmp.Diff(goRequired, schemaRequired, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("required of %s differs from the fields of %s without omitempty (-go +schema):\n%s", name, gt, diff)
			}
			for n, f := range fields {
				for _, p := range checkType(f.typ, s.Properties[n]) {
					t.Errorf("%s.%s (Go %s): %s", name, n, f.typ, p)
				}
			}
		})
	}
}

// TestEveryTypeHasSchema makes sure that a struct added to types.go gets a
// schema (or a line in goTypes).
func TestEveryTypeHasSchema(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "types.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse types.go: %v", err)
	}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE {
			continue
		}
		for _, spec := range gd.Specs {
			ts := spec.(*ast.TypeSpec)
			if _, ok := ts.Type.(*ast.StructType); !ok || !ts.Name.IsExported() {
				continue
			}
			if goTypes[ts.Name.Name] == nil {
				t.Errorf("type %s of types.go has no schema in goTypes", ts.Name.Name)
			}
		}
	}
}

var refPattern = regexp.MustCompile(`^#/components/(schemas|parameters|responses|headers|securitySchemes)/([A-Za-z0-9_]+)$`)

func TestOpenAPIRefsResolve(t *testing.T) {
	doc, err := decodeOpenAPI()
	if err != nil {
		t.Fatalf("decodeOpenAPI() error: %v", err)
	}
	components := doc.(map[string]any)["components"].(map[string]any)
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if k == "$ref" {
					ref, _ := e.(string)
					m := refPattern.FindStringSubmatch(ref)
					if m == nil {
						t.Errorf("%s: $ref %q is not a local component reference", where, ref)
						continue
					}
					kind, _ := components[m[1]].(map[string]any)
					if _, ok := kind[m[2]]; !ok {
						t.Errorf("%s: $ref %q does not resolve", where, ref)
					}
					continue
				}
				walk(where+"/"+k, e)
			}
		case []any:
			for _, e := range v {
				walk(where, e)
			}
		}
	}
	walk("", doc)
}

// authenticatedOutsideV1 are the operations outside /v1 that take the
// bearer token like the /v1 ones: the metrics, which name tenants.
var authenticatedOutsideV1 = map[string]bool{"GET /metrics": true}

// upgrades are the operations that switch to a WebSocket.
var upgrades = map[string]bool{"GET /v1/sessions/{id}/shell": true, "GET /v1/sessions/{id}/port-forward/{port}": true}

func TestOpenAPIOperations(t *testing.T) {
	doc := loadDocument(t)
	errorCodes := map[string]string{
		"400": "InvalidArgument", "401": "Unauthenticated", "403": "PermissionDenied",
		"404": "NotFound", "409": "Conflict", "413": "TooLarge",
		"429": "ResourceExhausted", "500": "Internal", "503": "Unavailable",
	}
	for name, r := range doc.Components.Responses {
		if got := r.Content["application/json"].Schema.Ref; got != "#/components/schemas/Error" {
			t.Errorf("response %s has schema %q, want the Error envelope", name, got)
		}
	}
	ids := make(map[string]string)
	paramRe := regexp.MustCompile(`\{([^}]+)\}`)
	for route, op := range operations(t, doc) {
		if op.OperationID == "" {
			t.Errorf("%s has no operationId", route)
		} else if other, dup := ids[op.OperationID]; dup {
			t.Errorf("%s and %s share operationId %q", route, other, op.OperationID)
		}
		ids[op.OperationID] = route
		if op.Summary == "" && op.Description == "" {
			t.Errorf("%s has neither summary nor description", route)
		}
		success := false
		for code, r := range op.Responses {
			if strings.HasPrefix(code, "2") {
				success = true
				continue
			}
			if code == "101" {
				// Switching Protocols: only the WebSocket upgrades.
				if !upgrades[route] {
					t.Errorf("%s answers 101, but it is no WebSocket upgrade", route)
				}
				success = true
				continue
			}
			want, ok := errorCodes[code]
			if !ok {
				t.Errorf("%s answers status %s, which the contract does not have", route, code)
				continue
			}
			if r.Ref != "#/components/responses/"+want {
				t.Errorf("%s status %s is %q, want #/components/responses/%s", route, code, r.Ref, want)
			}
		}
		if !success {
			t.Errorf("%s has no success response", route)
		}
		if _, ok := op.Responses["500"]; !ok {
			t.Errorf("%s does not document 500", route)
		}
		_, path, _ := strings.Cut(route, " ")
		if authenticatedOutsideV1[route] {
			for _, code := range []string{"401", "403"} {
				if _, ok := op.Responses[code]; !ok {
					t.Errorf("%s does not document %s", route, code)
				}
			}
			if op.Security != nil {
				t.Errorf("%s overrides the document's security; it takes the bearer token", route)
			}
		} else if strings.HasPrefix(path, "/v1/") {
			for _, code := range []string{"401", "403", "429", "503"} {
				if _, ok := op.Responses[code]; !ok {
					t.Errorf("%s does not document %s", route, code)
				}
			}
			if op.Security != nil {
				t.Errorf("%s overrides the document's security; v1 operations take the bearer token", route)
			}
		} else if op.Security == nil || len(*op.Security) != 0 {
			t.Errorf("%s should need no authentication (security: [])", route)
		}
		// Every {param} of the template is a declared path parameter.
		declared := make(map[string]bool)
		for _, p := range op.Parameters {
			if p.Ref != "" {
				p = doc.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
			}
			if p.In == "path" {
				if !p.Required {
					t.Errorf("%s: path parameter %s is not required", route, p.Name)
				}
				declared[p.Name] = true
			}
		}
		for _, m := range paramRe.FindAllStringSubmatch(path, -1) {
			if !declared[m[1]] {
				t.Errorf("%s: path parameter %s is not declared", route, m[1])
			}
			delete(declared, m[1])
		}
		for name := range declared {
			t.Errorf("%s: declares path parameter %s that the template lacks", route, name)
		}
		if strings.Contains(path, "/files") || strings.Contains(path, "/archive") {
			hasPath := false
			for _, p := range op.Parameters {
				if p.Ref == "#/components/parameters/Path" {
					hasPath = true
				}
			}
			if !hasPath {
				t.Errorf("%s has no path query parameter", route)
			}
		}
	}
}

// TestOpenAPIStreams checks the streamed answers: their content types and
// the events they document, each with the schema of its data.
func TestOpenAPIStreams(t *testing.T) {
	doc, err := decodeOpenAPI()
	if err != nil {
		t.Fatalf("decodeOpenAPI() error: %v", err)
	}
	get := func(v any, keys ...string) any {
		t.Helper()
		for _, k := range keys {
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("no %q in the document (path %q)", k, keys)
			}
			v = m[k]
		}
		return v
	}
	type events map[string]string // event name -> schema
	tests := []struct {
		route, path, method string
		wantTypes           []string
		wantEvents          events
	}{
		{
			route: "exec", path: "/v1/sessions/{id}/exec", method: "post",
			wantTypes:  []string{"application/json", "text/event-stream"},
			wantEvents: events{"stdout": "OutputChunk", "stderr": "OutputChunk", "exit": "ExecResult", "error": "Error"},
		},
		{
			route: "pull", path: "/v1/images/pull", method: "post",
			wantTypes:  []string{"application/json", "text/event-stream"},
			wantEvents: events{"progress": "PullProgress", "image": "Image", "error": "Error"},
		},
		{
			route: "process output", path: "/v1/sessions/{id}/processes/{pid}/output", method: "get",
			wantTypes:  []string{"application/octet-stream", "text/event-stream"},
			wantEvents: events{"output": "OutputChunk", "gap": "OutputGap", "exit": "ProcessExit"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.route, func(t *testing.T) {
			ok, _ := get(doc, "paths", tc.path, tc.method, "responses", "200").(map[string]any)
			// The streams of operations that also answer JSON are under
			// x-content, out of the generators' sight (a union of a JSON
			// object and a string fails a typed client's every use).
			content := map[string]any{}
			for _, key := range []string{"content", "x-content"} {
				m, _ := ok[key].(map[string]any)
				for mt, v := range m {
					content[mt] = v
				}
			}
			if plain, _ := ok["content"].(map[string]any); plain["application/json"] != nil && plain["text/event-stream"] != nil {
				t.Errorf("the 200 answer's content has JSON and a stream: generated clients get a union type; move the stream to x-content")
			}
			var types []string
			for mt := range content {
				types = append(types, mt)
			}
			sort.Strings(types)
			if diff := cmp.Diff(tc.wantTypes, types); diff != "" {
				t.Errorf("content types mismatch (-want +got):\n%s", diff)
			}
			got := events{}
			evs, _ := get(content, "text/event-stream", "x-sse-events").(map[string]any)
			for name, s := range evs {
				ref, _ := get(s, "$ref").(string)
				got[name] = strings.TrimPrefix(ref, "#/components/schemas/")
			}
			if diff := cmp.Diff(tc.wantEvents, got); diff != "" {
				t.Errorf("events mismatch (-want +got):\n%s", diff)
			}
			desc, _ := get(content, "text/event-stream", "schema", "description").(string)
			for name := range tc.wantEvents {
				if !strings.Contains(desc, "`"+name+"`") {
					t.Errorf("the stream's description does not describe event %s", name)
				}
			}
		})
	}
	if h := get(doc, "paths", "/v1/sessions/{id}/processes/{pid}/output", "get", "responses", "200", "headers", "Warren-Output-Offset"); h == nil {
		t.Errorf("the raw output does not document Warren-Output-Offset")
	}
	if ref, _ := get(doc, "paths", "/v1/sessions/{id}/shell", WebSocketKey, "responses", "101", "x-websocket-text-message", "$ref").(string); ref != "#/components/schemas/ShellMessage" {
		t.Errorf("the shell's text messages are %q, want ShellMessage", ref)
	}
	// A WebSocket is no operation: a generated HTTP client could not open it.
	for p, item := range get(doc, "paths").(map[string]any) {
		for key, v := range item.(map[string]any) {
			if !isOperation(key) {
				continue
			}
			if _, ok := get(v, "responses").(map[string]any)["101"]; ok {
				t.Errorf("%s %s answers 101 as an operation; document the WebSocket under %s", key, p, WebSocketKey)
			}
		}
	}
	for _, k := range []string{"contact", "license"} {
		if m, _ := get(doc, "info", k).(map[string]any); m["name"] == nil || m["url"] == nil {
			t.Errorf("info.%s = %v, want a name and a url", k, m)
		}
	}
}
