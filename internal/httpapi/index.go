package httpapi

import (
	"html/template"
	"net/http"
	"strings"
)

// indexPattern is the daemon's root, and only it ("/" alone would match
// every path): what a browser pointed at the daemon's address opens.
const indexPattern = "GET /{$}"

// The index is public like the API description it points at: a visitor
// without a key learns what answers here and where to read on. It is not
// an API operation, so it is not among Routes (nor in api/openapi.yaml).
func init() { publicRoutes[indexPattern] = true }

// DocsURL is where the index sends readers for the documentation.
const DocsURL = "https://github.com/warrenhq/warren#readme"

var indexPage = template.Must(template.New("index").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>warren {{.Version}}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:42rem;margin:3rem auto;padding:0 1rem}code{background:#f3f3f3;padding:0 .2em}</style>
</head>
<body>
<h1>warren</h1>
<p>A sandbox runtime for AI agents. This is its API, version <code>{{.Version}}</code> (commit <code>{{.Commit}}</code>).</p>
<ul>
<li><a href="/openapi.yaml">/openapi.yaml</a> (or <a href="/openapi.json">/openapi.json</a>): the REST API, every operation and error</li>
<li><a href="{{.Docs}}">the documentation</a>: quick start, exec semantics, gRPC, MCP, images, security</li>
<li><a href="/healthz">/healthz</a> and <a href="/readyz">/readyz</a>: liveness and readiness</li>
</ul>
<p>Every other call takes an API key: <code>curl -H "Authorization: Bearer $KEY" {{.Origin}}/v1/sessions</code>.
The daemon's first start left one in its data directory's <code>admin.key</code>.</p>
</body>
</html>
`))

// index answers GET / with a small page: the version and links to the API
// description and the docs. A client that asks for JSON gets the same as
// JSON.
func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	data := struct{ Version, Commit, Docs, Origin string }{s.cfg.Version, buildCommit(), DocsURL, "http://" + r.Host}
	accept := r.Header.Get("Accept")
	if strings.Contains(accept, "application/json") && !strings.Contains(accept, "text/html") {
		writeJSON(w, http.StatusOK, map[string]string{
			"name": "warren", "version": data.Version, "commit": data.Commit,
			"openapi": "/openapi.yaml", "docs": data.Docs,
		})
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = indexPage.Execute(w, data) // a failed write means the client left
}
