package app

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// checkNode lays out a node's files: a pins directory, a CNI config naming the bridge
// plugin, and a CNI bin directory with the plugins given.
func checkNode(t *testing.T, plugins ...string) Options {
	t.Helper()
	root := t.TempDir()
	opts := DefaultOptions()
	opts.RootDirectory = filepath.Join(root, "lib")
	opts.CNIConfDir = filepath.Join(root, "net.d")
	opts.CNIBinDir = filepath.Join(root, "bin")
	opts.CNICacheDir = filepath.Join(root, "cache")
	opts.PinnedImagesDir = filepath.Join(root, "pins.d")
	for _, d := range []string{opts.CNIConfDir, opts.CNIBinDir, opts.PinnedImagesDir} {
		assert.NilError(t, os.MkdirAll(d, 0o755))
	}
	assert.NilError(t, os.WriteFile(filepath.Join(opts.PinnedImagesDir, "k8s"), []byte("registry.k8s.io/*\nbusybox\n"), 0o600))
	conf := `{"cniVersion":"1.0.0","name":"podnet","plugins":[{"type":"bridge","bridge":"cni0","ipam":{"type":"host-local","subnet":"10.88.0.0/16"}}]}`
	assert.NilError(t, os.WriteFile(filepath.Join(opts.CNIConfDir, "10-podnet.conflist"), []byte(conf), 0o600))
	for _, p := range plugins {
		assert.NilError(t, os.WriteFile(filepath.Join(opts.CNIBinDir, p), []byte(fakePlugin), 0o755))
	}
	return opts
}

// fakePlugin answers a CNI VERSION call, which loading a configuration makes.
const fakePlugin = `#!/bin/sh
echo '{"cniVersion":"1.0.0","supportedVersions":["0.3.0","0.3.1","0.4.0","1.0.0"]}'
`

func engineOf(e engineProbe, err error) func(string) (engineProbe, func(), error) {
	return func(string) (engineProbe, func(), error) { return e, func() {}, err }
}

func runCheck(t *testing.T, opts Options, e func(string) (engineProbe, func(), error)) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code := checkConfig(&opts, &out, e)
	return code, out.String()
}

func TestCheckConfigHealthyNode(t *testing.T) {
	opts := checkNode(t, "bridge", "host-local", "loopback")
	code, out := runCheck(t, opts, engineOf(&flakyEngine{}, nil))
	assert.Equal(t, code, 0, out)
	for _, want := range []string{
		"ok     flags", "2 pattern(s) from 1 file(s)", "does not exist yet",
		`CNI network "podnet"`, "ok     engine       Docker 29.8.1", "all checks passed",
	} {
		assert.Check(t, is.Contains(out, want))
	}
}

func TestCheckConfigFindsEachProblem(t *testing.T) {
	opts := checkNode(t, "bridge") // host-local and loopback missing
	opts.NetworkPlugin = "kubenet"
	assert.NilError(t, os.WriteFile(filepath.Join(opts.PinnedImagesDir, "bad"), []byte("Not A Ref!\n"), 0o600))
	code, out := runCheck(t, opts, engineOf(nil, errors.New("bad endpoint")))
	assert.Equal(t, code, 1, out)
	assert.Check(t, is.Contains(out, "error  flags        --network-plugin kubenet"))
	assert.Check(t, is.Contains(out, "error  pins"))
	assert.Check(t, is.Contains(out, `line 1`))
	assert.Check(t, is.Contains(out, "error  engine       bad endpoint"))
	assert.Check(t, is.Contains(out, "3 check(s) failed"))
}

func TestCheckConfigMissingPluginsWarn(t *testing.T) {
	opts := checkNode(t, "bridge")
	code, out := runCheck(t, opts, engineOf(&flakyEngine{}, nil))
	assert.Equal(t, code, 0, out) // a CNI provider may install its plugins after the runtime starts
	assert.Check(t, is.Contains(out, "warn   network"))
	assert.Check(t, is.Contains(out, "loopback plugin not found"), out)
}

func TestCheckConfigEngineTooOld(t *testing.T) {
	opts := checkNode(t, "bridge", "host-local", "loopback")
	old := &flakyEngine{fails: []error{fmt.Errorf("engine 20.10 speaks API 1.41, but cri-dockerd needs API 1.42: %w", cerrdefs.ErrFailedPrecondition)}}
	code, out := runCheck(t, opts, engineOf(old, nil))
	assert.Equal(t, code, 1, out)
	assert.Check(t, is.Contains(out, "needs API 1.42"))
}

func TestCheckConfigRootIsAFile(t *testing.T) {
	opts := checkNode(t, "bridge", "host-local", "loopback")
	assert.NilError(t, os.WriteFile(opts.RootDirectory, nil, 0o600))
	code, out := runCheck(t, opts, engineOf(&flakyEngine{}, nil))
	assert.Equal(t, code, 1, out)
	assert.Check(t, strings.Contains(out, "is not a directory"))
}

func TestMainPinsCommandUnknown(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Main([]string{"pins", "hold"}, &stdout, &stderr)
	assert.Equal(t, code, 2)
	assert.Check(t, is.Contains(stderr.String(), `unknown command "pins hold"`))
}
