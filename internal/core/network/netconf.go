package network

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
)

// confExtensions are the file names the config directory is scanned for, as kubelet's
// CNI plugin did: a .conflist holds a network list, a .conf or .json a single network.
var confExtensions = []string{".conflist", ".conf", ".json"}

// netConfig is the network configuration in use.
type netConfig struct {
	// file is the path it was loaded from.
	file string
	// list is the network list (a single network is wrapped into a list of one).
	list *libcni.NetworkConfigList
	// caps are the capabilities its plugins declare.
	caps map[string]bool
}

// confFiles lists the configuration files in dir in lexical order, with a fingerprint
// that changes whenever one is added, removed, renamed or rewritten. Symbolic links are
// followed (ConfigMap mounts are made of them). A missing dir has no files.
func confFiles(dir string) (files []string, fingerprint string, err error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read CNI config directory: %w", err)
	}
	var fp strings.Builder
	for _, e := range entries { // ReadDir sorts by name
		if !hasConfExtension(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		fi, err := os.Stat(path)
		if err != nil || fi.IsDir() {
			continue
		}
		files = append(files, path)
		fmt.Fprintf(&fp, "%s\x00%d\x00%d\x00", e.Name(), fi.Size(), fi.ModTime().UnixNano())
	}
	return files, fp.String(), nil
}

func hasConfExtension(name string) bool {
	ext := filepath.Ext(name)
	for _, e := range confExtensions {
		if ext == e {
			return true
		}
	}
	return false
}

// loadConfFile reads one configuration file into a network list: a .conflist as it is
// (plus the plugins libcni loads from the <dir>/<network name>/ directory unless the list
// says loadOnlyInlinedPlugins), a .conf or .json wrapped into a list of one. MTU and
// hairpin mode are written into the "bridge" plugins that do not set them (see Config).
// Errors name the file.
func loadConfFile(path string, cfg Config) (*libcni.NetworkConfigList, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err // *PathError names the file
	}
	var raw map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // keep numbers as written when the config is re-encoded
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%s: invalid JSON: %w", path, err)
	}
	isList := filepath.Ext(path) == ".conflist"
	changed := false
	if isList {
		plugins, _ := raw["plugins"].([]any)
		for _, p := range plugins {
			if pm, ok := p.(map[string]any); ok && injectBridgeSettings(pm, cfg) {
				changed = true
			}
		}
	} else {
		if t, _ := raw["type"].(string); t == "" {
			return nil, fmt.Errorf("%s: no \"type\" (a network list belongs in a .conflist file)", path)
		}
		injectBridgeSettings(raw, cfg)
		raw = map[string]any{"name": raw["name"], "cniVersion": raw["cniVersion"], "plugins": []any{raw}}
		changed = true
	}
	if changed {
		if data, err = json.Marshal(raw); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	list, err := libcni.NetworkConfFromBytes(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if isList && !list.LoadOnlyInlinedPlugins {
		more, err := libcni.NetworkPluginConfsFromFiles(filepath.Dir(path), list.Name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		list.Plugins = append(list.Plugins, more...)
	}
	if len(list.Plugins) == 0 {
		return nil, fmt.Errorf("%s: network %q has no plugins", path, list.Name)
	}
	return list, nil
}

// injectBridgeSettings writes --network-plugin-mtu and --hairpin-mode into a "bridge"
// plugin's configuration where it does not set them itself, and reports whether it
// changed anything. Kubenet, upstream's only user of these flags, generated a bridge
// configuration with exactly these two keys.
func injectBridgeSettings(plugin map[string]any, cfg Config) bool {
	if t, _ := plugin["type"].(string); t != "bridge" {
		return false
	}
	changed := false
	if _, set := plugin["mtu"]; !set && cfg.MTU > 0 {
		plugin["mtu"] = cfg.MTU
		changed = true
	}
	if _, set := plugin["hairpinMode"]; !set && cfg.hairpinVeth() {
		plugin["hairpinMode"] = true
		changed = true
	}
	return changed
}

// loadNetwork picks the network configuration to use, as kubelet's CNI plugin did: the
// first file in lexical order that parses and whose plugins are all found in the
// plugin directories and support its CNI version. Files that fail are skipped; when none
// is usable the error (ErrFailedPrecondition) says why for each.
func loadNetwork(ctx context.Context, cni *libcni.CNIConfig, cfg Config, files []string) (*netConfig, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("no network config found in %s: %w", cfg.ConfDir, cerrdefs.ErrFailedPrecondition)
	}
	var problems []string
	for _, f := range files {
		list, err := loadConfFile(f, cfg)
		if err == nil {
			var caps []string
			caps, err = cni.ValidateNetworkList(ctx, list)
			if err != nil {
				if ctx.Err() != nil {
					return nil, classify("validate "+f, err)
				}
				err = fmt.Errorf("%s: network %q: %w", f, list.Name, err)
			} else {
				nc := &netConfig{file: f, list: list, caps: map[string]bool{}}
				for _, c := range caps {
					nc.caps[c] = true
				}
				return nc, nil
			}
		}
		problems = append(problems, err.Error())
	}
	return nil, fmt.Errorf("no usable network config in %s: %s: %w", cfg.ConfDir, strings.Join(problems, "; "), cerrdefs.ErrFailedPrecondition)
}

// findLoopback checks that the loopback plugin is in one of the plugin directories.
func findLoopback(binDirs []string) error {
	if _, err := invoke.FindInPath(loopbackType, binDirs); err != nil {
		return fmt.Errorf("loopback plugin not found in %s: %w", strings.Join(binDirs, ","), cerrdefs.ErrFailedPrecondition)
	}
	return nil
}
