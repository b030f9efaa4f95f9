// Command cri-dockerd is a drop-in replacement for Mirantis cri-dockerd, the CRI
// shim for Docker Engine, with arbitrary image pinning.
package main

import (
	"os"

	"github.com/dockpin/cri-dockerd/internal/app"
)

func main() {
	os.Exit(app.Main(os.Args[1:], os.Stdout, os.Stderr))
}
