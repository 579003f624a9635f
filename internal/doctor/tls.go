package doctor

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"time"
)

// certWarnBefore is how long before its end a serving certificate is
// reported: renewals (certbot, cert-manager) run 30 days ahead, so one
// still this close to its end is not being renewed.
const certWarnBefore = 14 * 24 * time.Hour

// CheckTLS checks the daemon's serving certificate (tls_cert_file,
// tls_key_file) as the daemon loads it: the pair loads and matches, it is
// valid now, it does not end within certWarnBefore, and it names
// advertise's host when the daemon is a fleet node (other nodes check
// that). Nothing without a certificate.
func CheckTLS(certFile, keyFile, advertise string, now time.Time) []Check {
	if certFile == "" {
		return nil
	}
	c := Check{Name: "tls: serving certificate", Required: true}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		c.Detail = err.Error()
		c.Fix = "tls_cert_file must hold the certificate (chain) in PEM and tls_key_file its private key"
		return []Check{c}
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			c.Detail = err.Error()
			return []Check{c}
		}
	}
	names := strings.Join(append(append([]string{}, leaf.DNSNames...), ipStrings(leaf)...), ", ")
	switch {
	case now.Before(leaf.NotBefore):
		c.Detail = fmt.Sprintf("valid only from %s", leaf.NotBefore.Format(time.RFC3339))
		c.Fix = "check this host's clock, or the certificate's dates"
	case now.After(leaf.NotAfter):
		c.Detail = fmt.Sprintf("expired %s", leaf.NotAfter.Format(time.RFC3339))
		c.Fix = "renew it; the daemon reads a renewed pair within 10 s"
	default:
		c.OK = true
		c.Detail = fmt.Sprintf("for %s, until %s", names, leaf.NotAfter.Format("2006-01-02"))
	}
	out := []Check{c}
	if c.OK && leaf.NotAfter.Sub(now) < certWarnBefore {
		out = append(out, Check{Name: "tls: certificate renewal", Detail: fmt.Sprintf("ends in %v", leaf.NotAfter.Sub(now).Round(time.Hour)),
			Fix: "renew it; the daemon reads a renewed pair within 10 s"})
	}
	if host := advertiseHost(advertise); c.OK && host != "" {
		v := Check{Name: "tls: certificate names fleet.advertise", Required: true, OK: leaf.VerifyHostname(host) == nil}
		v.Detail = fmt.Sprintf("%s in %s", host, names)
		if !v.OK {
			v.Detail = fmt.Sprintf("the certificate (for %s) does not name %s, which the other nodes connect to", names, host)
			v.Fix = "issue the certificate for fleet.advertise's host, or advertise a name it holds"
		}
		out = append(out, v)
	}
	return out
}

func ipStrings(c *x509.Certificate) []string {
	var out []string
	for _, ip := range c.IPAddresses {
		out = append(out, ip.String())
	}
	return out
}

// advertiseHost is the host of an https:// advertise URL, "" otherwise.
func advertiseHost(advertise string) string {
	rest, ok := strings.CutPrefix(advertise, "https://")
	if !ok {
		return ""
	}
	host, _, _ := strings.Cut(rest, "/")
	if h, _, ok := strings.Cut(host, "]:"); ok && strings.HasPrefix(h, "[") {
		return h[1:]
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[:i], ":") {
		return host[:i]
	}
	return strings.Trim(host, "[]")
}
