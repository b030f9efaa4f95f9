package nri

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
)

// Config is the NRI part of the command line, named as containerd and CRI-O name it.
type Config struct {
	// Enable turns NRI on (--enable-nri). Off by default: upstream cri-dockerd has no
	// NRI, and a drop-in replacement must not start listening on a socket that a
	// containerd 2.x on the same node (NRI on by default) may own.
	Enable bool `json:"enable"`
	// SocketPath is where external plugins connect (--nri-socket-path).
	SocketPath string `json:"socketPath"`
	// PluginPath is the directory of pre-installed plugins started at start-up
	// (--nri-plugin-dir).
	PluginPath string `json:"pluginPath"`
	// PluginConfigPath is the directory of those plugins' configuration drop-ins
	// (--nri-plugin-config-dir).
	PluginConfigPath string `json:"pluginConfigPath"`
	// RegistrationTimeout bounds a plugin's registration (--nri-plugin-registration-timeout).
	RegistrationTimeout time.Duration `json:"registrationTimeout"`
	// RequestTimeout bounds each plugin's handling of one event, Synchronize included
	// (--nri-plugin-request-timeout).
	RequestTimeout time.Duration `json:"requestTimeout"`
}

// DefaultConfig is containerd's and CRI-O's defaults, NRI off.
func DefaultConfig() Config {
	return Config{
		SocketPath:          adaptation.DefaultSocketPath,
		PluginPath:          adaptation.DefaultPluginPath,
		PluginConfigPath:    adaptation.DefaultPluginConfigPath,
		RegistrationTimeout: adaptation.DefaultPluginRegistrationTimeout,
		RequestTimeout:      adaptation.DefaultPluginRequestTimeout,
	}
}

// Validate checks the paths and timeouts (whether NRI is on or not).
func (c Config) Validate() error {
	var errs []error
	for _, p := range []struct{ flag, path string }{
		{"--nri-socket-path", c.SocketPath}, {"--nri-plugin-dir", c.PluginPath}, {"--nri-plugin-config-dir", c.PluginConfigPath},
	} {
		if !filepath.IsAbs(p.path) {
			errs = append(errs, fmt.Errorf("%s %q: must be an absolute path", p.flag, p.path))
		}
	}
	if c.RegistrationTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--nri-plugin-registration-timeout %v: must be positive", c.RegistrationTimeout))
	}
	if c.RequestTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--nri-plugin-request-timeout %v: must be positive", c.RequestTimeout))
	}
	return errors.Join(errs...)
}
