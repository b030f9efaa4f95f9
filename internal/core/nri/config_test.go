package nri

import (
	"testing"
	"time"

	"gotest.tools/v3/assert"
)

func TestConfigValidate(t *testing.T) {
	assert.NilError(t, DefaultConfig().Validate())
	assert.Check(t, !DefaultConfig().Enable, "off by default")
	assert.Check(t, DefaultConfig().SocketPath == "/var/run/nri/nri.sock")
	tests := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"relative socket", func(c *Config) { c.SocketPath = "nri.sock" }, `--nri-socket-path "nri.sock": must be an absolute path`},
		{"empty plugin dir", func(c *Config) { c.PluginPath = "" }, `--nri-plugin-dir "": must be an absolute path`},
		{"zero registration timeout", func(c *Config) { c.RegistrationTimeout = 0 }, "--nri-plugin-registration-timeout 0s: must be positive"},
		{"negative request timeout", func(c *Config) { c.RequestTimeout = -time.Second }, "--nri-plugin-request-timeout -1s: must be positive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mod(&c)
			assert.ErrorContains(t, c.Validate(), tc.want)
		})
	}
}
