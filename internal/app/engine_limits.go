package app

import (
	"fmt"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// engineLimits names each of our features that the engine's API version is too old
// for, and what the binary does instead: it degrades, and never fails a pod that does
// not ask for the feature. Logged once at start, so that an operator on Docker 23 to 28
// sees why a pod behaves differently there.
func engineLimits(v docker.Version) []string {
	limits := []struct{ api, docker, feature string }{
		{"1.43", "24", "one runc shim per pod (OCI annotations): each container gets a shim process of its own"},
		{"1.44", "25", "recursively read-only mounts: the runtime handler reports them unsupported, so kubelet refuses a pod that asks for them"},
		{"1.48", "28", "image volumes: a container that mounts an image fails with Unimplemented"},
		{"1.50", "28.3", "the engine's list of CDI devices: an unknown CDI device fails when its container starts, not at creation"},
		{"1.51", "28.5", "image volume subpaths: a mount with image_sub_path fails with Unimplemented"},
	}
	var out []string
	for _, l := range limits {
		if !v.APIAtLeast(l.api) {
			out = append(out, fmt.Sprintf("engine API %s is older than %s (Docker %s) for %s", v.NegotiatedAPIVersion, l.api, l.docker, l.feature))
		}
	}
	return out
}
