package daemon

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"
	"time"
)

// certReloadEvery bounds how often a handshake looks at the certificate
// files: a renewed certificate (certbot, cert-manager, a rotation script)
// is served within this long, without a restart.
const certReloadEvery = 10 * time.Second

// certFiles serves the certificate and key in two PEM files, loading them
// again when either file's content changed. A renewal
// that leaves the files unreadable or mismatched keeps the last good pair
// and logs the error.
type certFiles struct {
	certFile, keyFile string
	warn              func(msg string, args ...any)

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string
	checked time.Time
}

// newCertFiles loads the pair once; an error here stops the start.
func newCertFiles(certFile, keyFile string, warn func(string, ...any)) (*certFiles, error) {
	c := &certFiles{certFile: certFile, keyFile: keyFile, warn: warn}
	if err := c.load(); err != nil {
		return nil, err
	}
	return c, nil
}

// stampNow is a digest of both files' contents: a renewal shows however
// it was written (in place, by a rename, within one tick of the
// filesystem's clock, with the same size).
func (c *certFiles) stampNow() (string, error) {
	h := sha256.New()
	for _, f := range []string{c.certFile, c.keyFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	return string(h.Sum(nil)), nil
}

func (c *certFiles) load() error {
	stamp, err := c.stampNow()
	if err != nil {
		return fmt.Errorf("tls certificate: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("tls certificate %s with key %s: %w", c.certFile, c.keyFile, err)
	}
	if cert.Leaf == nil && len(cert.Certificate) > 0 {
		cert.Leaf, _ = x509.ParseCertificate(cert.Certificate[0]) // LoadX509KeyPair parsed it already
	}
	c.cert, c.stamp, c.checked = &cert, stamp, time.Now()
	return nil
}

// get is tls.Config.GetCertificate.
func (c *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.checked) >= certReloadEvery {
		c.checked = time.Now()
		if stamp, err := c.stampNow(); err == nil && stamp != c.stamp {
			if err := c.load(); err != nil {
				c.warn("a changed TLS certificate did not load; serving the previous one", "error", err)
			}
		}
	}
	return c.cert, nil
}

// serverTLS is the daemon's TLS configuration, nil without tls_cert_file.
func (d *Daemon) serverTLS() (*tls.Config, error) {
	if d.cfg.TLSCertFile == "" {
		return nil, nil
	}
	cf, err := newCertFiles(d.cfg.TLSCertFile, d.cfg.TLSKeyFile, d.log.Warn)
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: cf.get}, nil
}

// fleetClientTLS is the configuration for forwarding to nodes at https://:
// the roots of fleet.ca_file, or the host's.
func fleetClientTLS(caFile string) (*tls.Config, error) {
	if caFile == "" {
		return nil, nil
	}
	pool, err := certPool("fleet.ca_file", caFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}, nil
}

// certPool reads the CA certificates in the PEM file of a setting.
func certPool(setting, file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", setting, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s %s: no PEM certificate in it", setting, file)
	}
	return pool, nil
}
