package pinning_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/dockpin/cri-dockerd/pinning"
)

// engine is the host's own engine client as pinning sees it; a real host answers
// from its Docker client's Info (UsesContainerdStore(info.DriverStatus),
// info.Containerd.Address, info.Containerd.Namespaces.Containers) and ImageLoad.
type engine struct{ info pinning.EngineInfo }

func (e engine) EngineInfo(context.Context) (pinning.EngineInfo, error) { return e.info, nil }

func (e engine) LoadImages(context.Context, io.Reader) ([]string, error) {
	return nil, errors.New("no preload in this example")
}

// A host program (a cri-dockerd) registers the pinning flags on its own flag set,
// starts pinning with its sandbox image, root directory and engine, then asks
// Evaluate (ListImages) or Check (ImageStatus) whether images are pinned.
func ExampleStart() {
	root, _ := os.MkdirTemp("", "pinning-example")
	defer os.RemoveAll(root)

	// The host's flag set: its own flags, and pinning's.
	fs := pflag.NewFlagSet("cri-dockerd", pflag.ContinueOnError)
	sandbox := fs.String("pod-infra-container-image", "registry.k8s.io/pause:3.10", "")
	pinFlags := pinning.DefaultFlags()
	pinFlags.AddFlags(fs)
	if err := fs.Parse([]string{"--pinned-images=registry.local/infra/*", "--pinned-image-labels=team=platform"}); err != nil {
		fmt.Println(err)
		return
	}
	if err := pinFlags.Validate(*sandbox); err != nil {
		fmt.Println(err)
		return
	}

	pins, err := pinning.Start(context.Background(), pinFlags,
		pinning.Host{SandboxImage: *sandbox, RootDirectory: root, DockerEndpoint: "unix:///var/run/docker.sock"},
		engine{info: pinning.EngineInfo{Driver: "overlay2"}}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pins.Close()
	stop := pins.ReloadOnSIGHUP() // re-reads --pinned-images-file
	defer stop()

	images := []pinning.Image{
		{ID: "sha256:1", RepoTags: []string{"registry.k8s.io/pause:3.10"}},
		{ID: "sha256:2", RepoTags: []string{"registry.local/infra/proxy:2"}},
		{ID: "sha256:3", RepoTags: []string{"busybox:1.36"}, Labels: map[string]string{"team": "platform"}},
		{ID: "sha256:4", RepoTags: []string{"nginx:1.27"}},
	}
	reasons, err := pins.Evaluate(context.Background(), images) // ListImages
	if err != nil {
		fmt.Println(err) // a source without usable state: answer Unavailable, never "unpinned"
		return
	}
	for i, img := range images {
		fmt.Println(img.RepoTags[0], len(reasons[i]) > 0, reasons[i])
	}
	fmt.Println(len(pins.Check(context.Background(), images[3])) > 0) // ImageStatus
	info := pins.Info()                                               // verbose Status (crictl info)
	fmt.Println(info["patterns"], info["labelSelectors"])
	// Output:
	// registry.k8s.io/pause:3.10 true [{sandbox-image registry.k8s.io/pause:3.10}]
	// registry.local/infra/proxy:2 true [{pinned-images registry.local/infra/*}]
	// busybox:1.36 true [{pinned-image-labels label team=platform}]
	// nginx:1.27 false []
	// false
	// [registry.local/infra/*] [team=platform]
}

// The flags pinning registers, with their defaults.
func ExampleFlags_AddFlags() {
	fs := pflag.NewFlagSet("cri-dockerd", pflag.ContinueOnError)
	f := pinning.DefaultFlags()
	f.AddFlags(fs)
	fs.VisitAll(func(fl *pflag.Flag) { fmt.Printf("--%s=%s\n", fl.Name, fl.DefValue) })
	// Output:
	// --containerd-address=
	// --containerd-namespace=
	// --containerd-timeout=2s
	// --pin-dangling-records=false
	// --pin-from-config-labels=true
	// --pin-from-containerd-labels=auto
	// --pin-source-max-staleness=0s
	// --pinned-image-labels=[]
	// --pinned-images=[]
	// --pinned-images-dir=/etc/cri-dockerd/pins.d
	// --pinned-images-file=
	// --preload-image-status-wait=1m0s
	// --preload-images-dir=
	// --preserve-pin-on-pull=true
	// --restore-pinned-images=true
}
