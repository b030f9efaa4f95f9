package core

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

func writeDockerConfig(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.json")
	assert.NilError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestNodeCredentials(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	kubelet := writeDockerConfig(t, `{"auths":{"registry.example:5000":{"auth":"`+b64("kube:let")+`"}}}`)
	user := writeDockerConfig(t, `{"auths":{"https://registry.example:5000":{"username":"u","password":"p"},
		"https://index.docker.io/v1/":{"auth":"`+b64("hub:pw")+`"},"quay.io":{"identitytoken":"tok"}}}`)
	broken := writeDockerConfig(t, `{"auths":`)
	missing := filepath.Join(t.TempDir(), "none.json")
	for _, tc := range []struct {
		name    string
		files   []string
		ref     string
		want    *docker.AuthConfig
		wantErr string
	}{
		{name: "first file wins", files: []string{missing, kubelet, user}, ref: "registry.example:5000/pause:3.10",
			want: &docker.AuthConfig{Username: "kube", Password: "let", ServerAddress: "registry.example:5000"}},
		{name: "https key", files: []string{user}, ref: "registry.example:5000/pause:3.10",
			want: &docker.AuthConfig{Username: "u", Password: "p", ServerAddress: "registry.example:5000"}},
		{name: "docker hub's legacy key", files: []string{user}, ref: "rancher/mirrored-pause:3.6",
			want: &docker.AuthConfig{Username: "hub", Password: "pw", ServerAddress: "docker.io"}},
		{name: "identity token", files: []string{user}, ref: "quay.io/x/pause:1",
			want: &docker.AuthConfig{IdentityToken: "tok", ServerAddress: "quay.io"}},
		{name: "no entry", files: []string{kubelet, user}, ref: "registry.k8s.io/pause:3.10"},
		{name: "no files", files: []string{missing}, ref: "registry.k8s.io/pause:3.10"},
		{name: "broken file", files: []string{broken}, ref: "registry.k8s.io/pause:3.10", wantErr: "registry credentials in " + broken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := nodeCredentials(tc.files, tc.ref)
			if tc.wantErr != "" {
				assert.Check(t, is.ErrorContains(err, tc.wantErr))
				return
			}
			assert.NilError(t, err)
			assert.DeepEqual(t, got, tc.want)
		})
	}
}

// The sandbox image is pulled with the node's credentials for its registry.
func TestRunPodSandboxPullsWithNodeCredentials(t *testing.T) {
	env := newRTEnv(t, rtWithoutSandboxImage())
	env.engine.AddRemote(rtSandboxImage, testImage(9001, rtSandboxImage))
	env.svc.cfg.CredentialFiles = []string{writeDockerConfig(t, `{"auths":{"registry.k8s.io":{"username":"node","password":"secret"}}}`)}
	_, err := env.svc.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: rtSandboxConfig("web")})
	assert.NilError(t, err)
	pulls := env.engine.Pulls()
	assert.Assert(t, is.Len(pulls, 1))
	assert.DeepEqual(t, pulls[0].Auth, &docker.AuthConfig{Username: "node", Password: "secret", ServerAddress: "registry.k8s.io"})
}
