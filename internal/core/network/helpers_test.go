package network

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cnitypes "github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/types/create"
	"gotest.tools/v3/assert"
)

// fakePluginScript is a CNI plugin for tests: it appends one line per call to calls.log
// beside itself (plugin type, CNI_COMMAND, CNI_IFNAME, CNI_NETNS, CNI_ARGS, stdin), the
// loopback plugin to calls-lo.log (it runs at once with the pod network's plugins),
// answers VERSION, fails a command when a file fail-<type>-<command> exists (printing its
// content), and answers ADD with a fixed result: for loopback 127.0.0.1 on lo; for any
// other type an IPv6 and an IPv4 address on eth0 in the sandbox and one on a host bridge.
const fakePluginScript = `#!/bin/sh
dir=$(dirname "$0")
type=$(basename "$0")
input=$(cat)
log=calls.log
[ "$type" != loopback ] || log=calls-lo.log
printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$type" "$CNI_COMMAND" "$CNI_IFNAME" "$CNI_NETNS" "$CNI_ARGS" "$input" >>"$dir/$log"
if [ "$CNI_COMMAND" = VERSION ]; then
  echo '{"cniVersion":"1.0.0","supportedVersions":["0.1.0","0.2.0","0.3.0","0.3.1","0.4.0","1.0.0"]}'
  exit 0
fi
if [ -f "$dir/fail-$type-$CNI_COMMAND" ]; then
  cat "$dir/fail-$type-$CNI_COMMAND"
  exit 1
fi
if [ "$CNI_COMMAND" = ADD ]; then
  v=$(printf '%s' "$input" | sed -n 's/.*"cniVersion":"\([^"]*\)".*/\1/p')
  if [ "$type" = loopback ]; then
    printf '{"cniVersion":"%s","interfaces":[{"name":"lo","sandbox":"%s"}],"ips":[{"version":"4","address":"127.0.0.1/8","interface":0}]}\n' "$v" "$CNI_NETNS"
  else
    printf '{"cniVersion":"%s","interfaces":[{"name":"cni0"},{"name":"eth0","sandbox":"%s"}],"ips":[{"version":"6","address":"fd00::5/64","interface":1},{"version":"4","address":"10.22.0.5/24","interface":1},{"version":"4","address":"10.22.0.1/24","interface":0}]}\n' "$v" "$CNI_NETNS"
  fi
fi
exit 0
`

// fakeEnv is a plugin directory of fake plugins, a config directory and a cache directory.
type fakeEnv struct {
	binDir, confDir, cacheDir string
}

func newFakeEnv(t *testing.T, types ...string) *fakeEnv {
	t.Helper()
	root := t.TempDir()
	e := &fakeEnv{
		binDir:   filepath.Join(root, "bin"),
		confDir:  filepath.Join(root, "net.d"),
		cacheDir: filepath.Join(root, "cache"),
	}
	assert.NilError(t, os.MkdirAll(e.binDir, 0o755))
	assert.NilError(t, os.MkdirAll(e.confDir, 0o755))
	for _, typ := range append([]string{"loopback"}, types...) {
		e.addPlugin(t, typ)
	}
	return e
}

// fakePluginPath is the one copy of fakePluginScript, written by TestMain before any
// test runs: plugin directories link to it, because writing an executable while other
// tests fork makes exec fail with ETXTBSY (the child holds the write descriptor until
// it execs).
var fakePluginPath string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "cni-fake-plugin-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	fakePluginPath = filepath.Join(dir, "fake-plugin")
	if err := os.WriteFile(fakePluginPath, []byte(fakePluginScript), 0o755); err != nil {
		panic(err)
	}
	return m.Run()
}

// addPlugin installs the fake plugin as typ: a symbolic link, so "$0" still names this
// environment's plugin directory.
func (e *fakeEnv) addPlugin(t *testing.T, typ string) {
	t.Helper()
	assert.NilError(t, os.Symlink(fakePluginPath, filepath.Join(e.binDir, typ)))
}

func (e *fakeEnv) config() Config {
	c := DefaultConfig()
	c.BinDirs = []string{e.binDir}
	c.ConfDir = e.confDir
	c.CacheDir = e.cacheDir
	return c
}

func (e *fakeEnv) manager(t *testing.T, mutate ...func(*Config)) *Manager {
	t.Helper()
	c := e.config()
	for _, f := range mutate {
		f(&c)
	}
	m, err := New(c, nil)
	assert.NilError(t, err)
	return m
}

func (e *fakeEnv) writeConf(t *testing.T, name, content string) {
	t.Helper()
	assert.NilError(t, os.WriteFile(filepath.Join(e.confDir, name), []byte(content), 0o644))
}

// fail makes the fake plugin typ fail command cmd with the given stdout.
func (e *fakeEnv) fail(t *testing.T, typ, cmd, output string) {
	t.Helper()
	assert.NilError(t, os.WriteFile(filepath.Join(e.binDir, "fail-"+typ+"-"+cmd), []byte(output), 0o644))
}

type call struct {
	Type, Command, IfName, NetNS, Args string
	Stdin                              map[string]any
}

// calls returns the recorded plugin calls, VERSION calls left out: the pod network's
// plugins' in their order, then the loopback plugin's (the two run at once).
func (e *fakeEnv) calls(t *testing.T) []call {
	t.Helper()
	var out []call
	for _, name := range []string{"calls.log", "calls-lo.log"} {
		out = append(out, readCalls(t, filepath.Join(e.binDir, name))...)
	}
	return out
}

func readCalls(t *testing.T, path string) []call {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	assert.NilError(t, err)
	defer f.Close()
	var out []call
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), "\t", 6)
		assert.Equal(t, len(parts), 6, sc.Text())
		if parts[1] == "VERSION" {
			continue
		}
		c := call{Type: parts[0], Command: parts[1], IfName: parts[2], NetNS: parts[3], Args: parts[4]}
		assert.NilError(t, json.Unmarshal([]byte(parts[5]), &c.Stdin), parts[5])
		out = append(out, c)
	}
	assert.NilError(t, sc.Err())
	return out
}

func (e *fakeEnv) resetCalls(t *testing.T) {
	t.Helper()
	for _, name := range []string{"calls.log", "calls-lo.log"} {
		if err := os.Remove(filepath.Join(e.binDir, name)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}

// summary renders calls as "type COMMAND ifname" for comparison.
func summary(calls []call) []string {
	out := make([]string, 0, len(calls))
	for _, c := range calls {
		out = append(out, c.Type+" "+c.Command+" "+c.IfName)
	}
	return out
}

// fakeNetNS returns an existing file standing in for a network namespace path.
func fakeNetNS(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "netns")
	assert.NilError(t, os.WriteFile(p, nil, 0o644))
	return p
}

const bridgePortmapList = `{
  "cniVersion": "1.0.0",
  "name": "testnet",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "ipam": {"type": "host-local", "subnet": "10.22.0.0/24"}},
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {"type": "bandwidth", "capabilities": {"bandwidth": true}}
  ]
}`

// resultFromJSON decodes a plugin result of the given CNI version.
func resultFromJSON(version string, data []byte) (cnitypes.Result, error) {
	return create.Create(version, data)
}
