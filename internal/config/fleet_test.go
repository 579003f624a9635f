package config

import (
	"strings"
	"testing"
	"time"
)

func TestValidateFleet(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Fleet, *Config)
		wantErr string // "" for valid
	}{
		{"off", func(f *Fleet, c *Config) {}, ""},
		{"external etcd", func(f *Fleet, c *Config) { f.Etcd = []string{"http://10.0.0.1:2379", "https://e2:2379"} }, ""},
		{"not a URL", func(f *Fleet, c *Config) { f.Etcd = []string{"10.0.0.1:2379"} }, "not an etcd client URL"},
		{"fractional TTL", func(f *Fleet, c *Config) { f.Etcd = []string{"http://e:2379"}; f.NodeTTL = 1500 * time.Millisecond }, "whole seconds"},
		{"wildcard listen", func(f *Fleet, c *Config) {
			f.Etcd = []string{"http://e:2379"}
			c.Listen = "0.0.0.0:7433"
			c.Auth.Insecure = true
		}, "wildcard"},
		{"wildcard listen, advertised", func(f *Fleet, c *Config) {
			f.Etcd = []string{"http://e:2379"}
			c.Listen = "0.0.0.0:7433"
			f.Advertise = "http://10.0.0.7:7433"
		}, ""},
		{"advertise with a path", func(f *Fleet, c *Config) { f.Etcd = []string{"http://e:2379"}; f.Advertise = "http://h:1/x" }, "base URL"},
		{"cert without key", func(f *Fleet, c *Config) { f.Etcd = []string{"https://e:2379"}; f.EtcdCertFile = "/c.pem" }, "go together"},
		{"embedded", func(f *Fleet, c *Config) {
			f.Embedded = true
			f.InitialCluster = []string{"a=http://10.0.0.1:2380", "b=http://10.0.0.2:2380", "c=http://10.0.0.3:2380"}
		}, ""},
		{"embedded without cluster", func(f *Fleet, c *Config) { f.Embedded = true }, "needs fleet.etcd_initial_cluster"},
		{"bad member", func(f *Fleet, c *Config) { f.Embedded = true; f.InitialCluster = []string{"a"} }, "name=http"},
		{"cluster without embedded", func(f *Fleet, c *Config) {
			f.Etcd = []string{"http://e:2379"}
			f.InitialCluster = []string{"a=http://h:2380"}
		}, "set fleet.etcd_embedded"},
		{"node name with slash", func(f *Fleet, c *Config) { f.Etcd = []string{"http://e:2379"}; f.Node = "a/b" }, "no slash"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.mutate(&c.Fleet, &c)
			err := c.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}
