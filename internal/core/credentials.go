package core

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/imageref"
)

// DefaultCredentialFiles are where the node keeps registry credentials, searched in
// this order as upstream (kubelet's docker keyring) searches them.
func DefaultCredentialFiles() []string {
	files := []string{"/var/lib/kubelet/config.json"}
	if home, err := os.UserHomeDir(); err == nil {
		files = append(files, home+"/.docker/config.json")
	}
	return append(files, "/.docker/config.json")
}

// dockerConfig is the part of a docker config.json that holds credentials.
type dockerConfig struct {
	Auths map[string]struct {
		Auth          string `json:"auth"`
		Username      string `json:"username"`
		Password      string `json:"password"`
		IdentityToken string `json:"identitytoken"`
	} `json:"auths"`
}

// NodeCredentials returns the credentials the node holds in files for the registry
// of ref, nil when it holds none: the host pulls the images of preload lists with them.
func NodeCredentials(files []string, ref string) (*docker.AuthConfig, error) {
	return nodeCredentials(files, ref)
}

// nodeCredentials returns the credentials the node holds for the registry of ref
// (the first file that has an entry for it wins), nil when it holds none. Only the
// sandbox image is pulled this way: kubelet brings its own credentials for the rest.
func nodeCredentials(files []string, ref string) (*docker.AuthConfig, error) {
	r, err := imageref.Parse(ref)
	if err != nil {
		return nil, err
	}
	host := r.Domain()
	keys := []string{host, "https://" + host, "http://" + host}
	if host == "docker.io" {
		keys = append(keys, "https://index.docker.io/v1/", "index.docker.io")
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("registry credentials: %w", err)
		}
		var cfg dockerConfig
		if err := json.Unmarshal(b, &cfg); err != nil {
			return nil, fmt.Errorf("registry credentials in %s: %w", file, err)
		}
		for _, k := range keys {
			e, ok := cfg.Auths[k]
			if !ok {
				continue
			}
			auth := &docker.AuthConfig{Username: e.Username, Password: e.Password, IdentityToken: e.IdentityToken, ServerAddress: host}
			if e.Auth != "" {
				raw, err := base64.StdEncoding.DecodeString(e.Auth)
				if err != nil {
					return nil, fmt.Errorf("registry credentials for %s in %s: bad auth: %w", k, file, err)
				}
				user, pass, ok := strings.Cut(string(raw), ":")
				if !ok {
					return nil, fmt.Errorf("registry credentials for %s in %s: auth is not user:password", k, file)
				}
				auth.Username, auth.Password = user, pass
			}
			return auth, nil
		}
	}
	return nil, nil
}
