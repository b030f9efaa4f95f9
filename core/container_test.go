package core

import (
	"context"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/core/docker"
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
