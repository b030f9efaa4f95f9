package core

import (
	"context"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/core/docker"
)

func TestImageVolumes(t *testing.T) {
	img := &runtimeapi.ImageSpec{Image: "sha256:0123"}
	for _, tc := range []struct {
		name    string
		config  func(*Config)
		mount   *runtimeapi.Mount
		want    []docker.ImageMount
		errKind func(error) bool
	}{
		{
			name:   "image root",
			config: func(c *Config) { c.ImageVolumes = true },
			mount:  &runtimeapi.Mount{ContainerPath: "/data", Image: img, Readonly: true},
			want:   []docker.ImageMount{{Image: "sha256:0123", Target: "/data"}},
		},
		{
			name:   "image sub path",
			config: func(c *Config) { c.ImageVolumes, c.ImageVolumeSubpaths = true, true },
			mount:  &runtimeapi.Mount{ContainerPath: "/data", Image: img, ImageSubPath: "etc/conf"},
			want:   []docker.ImageMount{{Image: "sha256:0123", Target: "/data", SubPath: "etc/conf"}},
		},
		{
			name:    "engine without image mounts",
			mount:   &runtimeapi.Mount{ContainerPath: "/data", Image: img},
			errKind: cerrdefs.IsNotImplemented,
		},
		{
			name:    "engine without image sub paths",
			config:  func(c *Config) { c.ImageVolumes = true },
			mount:   &runtimeapi.Mount{ContainerPath: "/data", Image: img, ImageSubPath: "etc"},
			errKind: cerrdefs.IsNotImplemented,
		},
		{
			name:    "propagation",
			config:  func(c *Config) { c.ImageVolumes = true },
			mount:   &runtimeapi.Mount{ContainerPath: "/data", Image: img, Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
			errKind: cerrdefs.IsInvalidArgument,
		},
		{
			name:    "ID-mapped host path",
			mount:   &runtimeapi.Mount{ContainerPath: "/data", HostPath: "/srv", UidMappings: []*runtimeapi.IDMapping{{HostId: 1000, Length: 1}}},
			errKind: cerrdefs.IsNotImplemented,
		},
		{
			name:    "mount options",
			mount:   &runtimeapi.Mount{ContainerPath: "/data", HostPath: "/srv", MountOptions: []string{"noexec"}},
			errKind: cerrdefs.IsNotImplemented,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []rtOption
			if tc.config != nil {
				opts = append(opts, rtWithConfig(tc.config))
			}
			env := newRTEnv(t, opts...)
			sbID, sbCfg := env.webSandbox(t)
			cfg := rtContainerConfig("app")
			cfg.Mounts = []*runtimeapi.Mount{tc.mount}
			resp, err := env.svc.CreateContainer(context.Background(), rtCreateReq(sbID, sbCfg, cfg))
			if tc.errKind != nil {
				assert.Assert(t, tc.errKind(err), "got %v", err)
				assert.ErrorContains(t, err, "/data")
				return
			}
			assert.NilError(t, err)
			spec := env.spec(t, resp.GetContainerId())
			assert.DeepEqual(t, spec.ImageMounts, tc.want)
			assert.Equal(t, len(spec.Mounts), 0)
		})
	}
}
