package e2b

import (
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/session"
)

// The labels that keep what E2B knows of a sandbox beside warren's record.
// They are under warren.dev/, which clients cannot set, so they are the
// facade's word; the store keeps them with the session and warren's API
// shows them.
const (
	labelTemplate   = "warren.dev/e2b-template"   // the template id the sandbox was created from
	labelEnd        = "warren.dev/e2b-end"        // endAt, RFC 3339
	labelOnTimeout  = "warren.dev/e2b-on-timeout" // "pause", or absent for kill
	labelAutoResume = "warren.dev/e2b-auto-resume"
	labelKey        = "warren.dev/e2b-key"      // the id of the API key that created it
	labelInternet   = "warren.dev/e2b-internet" // "true" or "false", absent if not set
)

// EnvdVersion is the envd version the facade reports. The SDK turns
// features on by it: 0.6.4 is the first with everything the kit's tests
// use (file metadata 0.6.2, watch entry info 0.6.3, allowNetworkMounts
// 0.6.4).
const EnvdVersion = "0.6.4"

// BaseTemplate is E2B's default template; its image is BaseImage.
const (
	BaseTemplate = "base"
	BaseImage    = "e2b-base"
	// mcpTemplate is the SDK's default template when MCP servers are
	// asked for; warren has no MCP gateway image, so it runs the base
	// image, where the gateway's start fails as the SDK expects of a
	// template without it.
	mcpTemplate = "mcp-gateway"
)

// metadata is a session's E2B metadata: its labels without warren's own.
func metadata(labels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		if !strings.HasPrefix(k, "warren.dev/") {
			out[k] = v
		}
	}
	return out
}

// templateOf is the E2B template id of a session: the one it was created
// with, else its image (a session made through warren's own API).
func templateOf(s *session.Session) string {
	if t := s.Labels[labelTemplate]; t != "" {
		return t
	}
	if s.Image == BaseImage {
		return BaseTemplate
	}
	return s.Image
}

// endAt is when the session ends: the facade's record of it, else warren's
// own expiry.
func endAt(s *session.Session) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, s.Labels[labelEnd]); err == nil {
		return t
	}
	return s.ExpiresAt()
}

// state is E2B's state of a session.
func state(s *session.Session) string {
	if s.Paused() {
		return "paused"
	}
	return "running"
}

// accessToken is the sandbox's envd access token: an HMAC of its tenant,
// id and creation time under the facade's secret (in a fleet, for a
// sandbox created since the node joined it, under a key derived from the
// fleet's secret: fleettokens.go). It is never stored (a label would show
// it to every reader of the session), it is the same for the sandbox's
// whole life, as the SDK keeps it that long and signs URLs with it, and a
// new session of the same id gets another. "" while the fleet's secret is
// not known (the node has not reached the registry since it started).
func (s *Server) accessToken(sess *session.Session) string {
	key := s.secret
	if s.fleetSecret != nil && !sess.CreatedAt.Before(s.fleetSince) {
		if key = fleetTokenKey(s.fleetSecret()); key == nil {
			return ""
		}
	}
	return tokenWith(key, sess.Tenant, sess.ID, sess.CreatedAt)
}

// sandbox is E2B's Sandbox: the answer of create, connect and fork.
type sandbox struct {
	TemplateID         string  `json:"templateID"`
	SandboxID          string  `json:"sandboxID"`
	Alias              string  `json:"alias,omitempty"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken,omitempty"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

// clientID is E2B's deprecated clientID (the node); warren answers a
// constant.
const clientID = "warren"

func (s *Server) sandboxOf(sess *session.Session) sandbox {
	out := sandbox{TemplateID: templateOf(sess), SandboxID: sess.ID, ClientID: clientID, EnvdVersion: EnvdVersion,
		EnvdAccessToken: s.accessToken(sess)}
	if out.TemplateID == BaseTemplate {
		out.Alias = BaseTemplate
	}
	if s.previewDomain != "" {
		d := s.previewDomain
		out.Domain = &d
	}
	return out
}

// lifecycle is E2B's SandboxLifecycle.
type lifecycle struct {
	AutoResume bool   `json:"autoResume"`
	OnTimeout  string `json:"onTimeout"`
}

// listed is E2B's ListedSandbox and, with the fields after State,
// SandboxDetail.
type listed struct {
	TemplateID   string            `json:"templateID"`
	Alias        string            `json:"alias,omitempty"`
	SandboxID    string            `json:"sandboxID"`
	ClientID     string            `json:"clientID"`
	StartedAt    time.Time         `json:"startedAt"`
	EndAt        time.Time         `json:"endAt"`
	CPUCount     int               `json:"cpuCount"`
	MemoryMB     int64             `json:"memoryMB"`
	DiskSizeMB   int64             `json:"diskSizeMB"`
	Metadata     map[string]string `json:"metadata"`
	State        string            `json:"state"`
	EnvdVersion  string            `json:"envdVersion"`
	VolumeMounts []struct{}        `json:"volumeMounts"`

	EnvdAccessToken     string     `json:"envdAccessToken,omitempty"`
	AllowInternetAccess *bool      `json:"allowInternetAccess,omitempty"`
	Domain              *string    `json:"domain,omitempty"`
	Lifecycle           *lifecycle `json:"lifecycle,omitempty"`
}

func (s *Server) listedOf(sess *session.Session, detail bool) listed {
	cpus := int(sess.Limits.CPUs + 0.999)
	out := listed{TemplateID: templateOf(sess), SandboxID: sess.ID, ClientID: clientID, StartedAt: sess.CreatedAt,
		EndAt: endAt(sess).UTC(), CPUCount: max(1, cpus), MemoryMB: sess.Limits.MemoryMB, DiskSizeMB: sess.Limits.DiskMB,
		Metadata: metadata(sess.Labels), State: state(sess), EnvdVersion: EnvdVersion, VolumeMounts: []struct{}{}}
	if out.TemplateID == BaseTemplate {
		out.Alias = BaseTemplate
	}
	if detail {
		out.EnvdAccessToken = s.accessToken(sess)
		if v := sess.Labels[labelInternet]; v != "" {
			b := v == "true"
			out.AllowInternetAccess = &b
		}
		if s.previewDomain != "" {
			d := s.previewDomain
			out.Domain = &d
		}
		out.Lifecycle = &lifecycle{OnTimeout: "kill", AutoResume: sess.Labels[labelAutoResume] != ""}
		if sess.Labels[labelOnTimeout] == "pause" {
			out.Lifecycle.OnTimeout = "pause"
		}
	}
	return out
}
