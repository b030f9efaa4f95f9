package core

import (
	"context"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

func TestIsCDIName(t *testing.T) {
	for name, want := range map[string]bool{
		"vendor.com/class=name":     true,
		"nvidia.com/gpu=all":        true,
		"example.org/fpga=dev:0.1":  true,
		"/dev/fuse":                 false,
		"":                          false,
		"vendor.com/class":          false,
		"vendor.com/class=":         false,
		"/class=name":               false,
		"vendor.com/=name":          false,
		"vendor.com/a/b=name":       false,
		"vendor.com/class=na/me":    false,
		"vendor.com/class=name=two": false,
	} {
		assert.Equal(t, isCDIName(name), want, name)
	}
}

func TestCreateContainerChecksCDIDevices(t *testing.T) {
	for _, tc := range []struct {
		name    string
		info    func(*docker.Info)
		devices []string
		errKind func(error) bool
	}{
		{name: "known", devices: []string{"vendor.com/gpu=0"}},
		{name: "unknown", devices: []string{"vendor.com/gpu=0", "vendor.com/gpu=9"}, errKind: cerrdefs.IsNotFound},
		{name: "CDI off", devices: []string{"vendor.com/gpu=0"}, info: func(i *docker.Info) { i.CDISpecDirs = nil }, errKind: cerrdefs.IsFailedPrecondition},
		{
			name: "engine that does not report its devices", devices: []string{"vendor.com/gpu=9"},
			info: func(i *docker.Info) { i.CDIDevicesReported, i.CDISpecDirs = false, nil },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newRTEnv(t)
			ctx := context.Background()
			info, err := env.engine.Info(ctx)
			assert.NilError(t, err)
			info.CDISpecDirs, info.CDIDevices, info.CDIDevicesReported = []string{"/etc/cdi"}, []string{"vendor.com/gpu=0", "vendor.com/gpu=1"}, true
			if tc.info != nil {
				tc.info(&info)
			}
			env.engine.SetInfo(info)
			sbID, sbCfg := env.webSandbox(t)
			cfg := rtContainerConfig("app")
			for _, d := range tc.devices {
				cfg.CDIDevices = append(cfg.CDIDevices, &runtimeapi.CDIDevice{Name: d})
			}
			_, err = env.svc.CreateContainer(ctx, rtCreateReq(sbID, sbCfg, cfg))
			if tc.errKind == nil {
				assert.NilError(t, err)
				return
			}
			assert.Check(t, tc.errKind(err), "got %v", err)
			assert.ErrorContains(t, err, "CDI")
		})
	}
}

func TestImageVolumes(t *testing.T) {
	img := &runtimeapi.ImageSpec{Image: rtContainerImage}
	for _, tc := range []struct {
		name    string
		config  func(*Config)
		mount   *runtimeapi.Mount
		files   []string // in the image, for image_sub_path checks
		want    []docker.ImageMount
		errKind func(error) bool
	}{
		{
			name:   "image root",
			config: func(c *Config) { c.ImageVolumes = true },
			mount:  &runtimeapi.Mount{ContainerPath: "/data", Image: img, Readonly: true},
			want:   []docker.ImageMount{{Image: rtContainerImage, Target: "/data"}},
		},
		{
			name:   "image sub path",
			config: func(c *Config) { c.ImageVolumes, c.ImageVolumeSubpaths = true, true },
			mount:  &runtimeapi.Mount{ContainerPath: "/data", Image: img, Readonly: true, ImageSubPath: "etc/conf"},
			files:  []string{"/etc/conf/app.yaml"},
			want:   []docker.ImageMount{{Image: rtContainerImage, Target: "/data", SubPath: "etc/conf"}},
		},
		{
			name:    "image sub path the image lacks",
			config:  func(c *Config) { c.ImageVolumes, c.ImageVolumeSubpaths = true, true },
			mount:   &runtimeapi.Mount{ContainerPath: "/data", Image: img, Readonly: true, ImageSubPath: "etc/other"},
			files:   []string{"/etc/conf/app.yaml"},
			errKind: cerrdefs.IsInvalidArgument,
		},
		{
			name:    "image sub path out of the image",
			config:  func(c *Config) { c.ImageVolumes, c.ImageVolumeSubpaths = true, true },
			mount:   &runtimeapi.Mount{ContainerPath: "/data", Image: img, Readonly: true, ImageSubPath: "../etc"},
			errKind: cerrdefs.IsInvalidArgument,
		},
		{
			name:    "not read-only",
			config:  func(c *Config) { c.ImageVolumes = true },
			mount:   &runtimeapi.Mount{ContainerPath: "/data", Image: img},
			errKind: cerrdefs.IsInvalidArgument,
		},
		{
			name:    "image the engine does not have",
			config:  func(c *Config) { c.ImageVolumes = true },
			mount:   &runtimeapi.Mount{ContainerPath: "/data", Image: &runtimeapi.ImageSpec{Image: "nothere:1"}, Readonly: true},
			errKind: cerrdefs.IsNotFound,
		},
		{
			name:    "engine without image mounts",
			mount:   &runtimeapi.Mount{ContainerPath: "/data", Image: img},
			errKind: cerrdefs.IsNotImplemented,
		},
		{
			name:    "engine without image sub paths",
			config:  func(c *Config) { c.ImageVolumes = true },
			mount:   &runtimeapi.Mount{ContainerPath: "/data", Image: img, Readonly: true, ImageSubPath: "etc"},
			errKind: cerrdefs.IsNotImplemented,
		},
		{
			name:    "propagation",
			config:  func(c *Config) { c.ImageVolumes = true },
			mount:   &runtimeapi.Mount{ContainerPath: "/data", Image: img, Readonly: true, Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
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
			if tc.files != nil {
				env.engine.SetImageFiles(rtContainerImage, tc.files...)
			}
			sbID, sbCfg := env.webSandbox(t)
			cfg := rtContainerConfig("app")
			cfg.Mounts = []*runtimeapi.Mount{tc.mount}
			resp, err := env.svc.CreateContainer(context.Background(), rtCreateReq(sbID, sbCfg, cfg))
			// The container that checked image_sub_path is gone, whatever the outcome.
			checks, lerr := env.engine.ListContainers(context.Background(), docker.ContainerFilter{Labels: map[string]string{labelSubPathCheck: "/data"}})
			assert.NilError(t, lerr)
			assert.Equal(t, len(checks), 0)
			if tc.errKind != nil {
				assert.Assert(t, tc.errKind(err), "got %v", err)
				if !cerrdefs.IsNotFound(err) {
					assert.ErrorContains(t, err, "/data")
				}
				return
			}
			assert.NilError(t, err)
			spec := env.spec(t, resp.GetContainerId())
			assert.DeepEqual(t, spec.ImageMounts, tc.want)
			assert.Equal(t, len(spec.Mounts), 0)

			// ContainerStatus reports it, with the image's ID as image_ref.
			st := containerStatus(t, env, resp.GetContainerId(), false).Status
			assert.Equal(t, len(st.Mounts), 1)
			m := st.Mounts[0]
			assert.Equal(t, m.ContainerPath, "/data")
			assert.Check(t, m.Readonly)
			assert.Equal(t, m.ImageSubPath, tc.want[0].SubPath)
			assert.Equal(t, m.GetImage().GetImage(), rtContainerImage)
			img, err := env.engine.InspectImage(context.Background(), rtContainerImage)
			assert.NilError(t, err)
			assert.Equal(t, m.GetImage().GetImageRef(), img.ID)
		})
	}
}
