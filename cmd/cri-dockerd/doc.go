// Command cri-dockerd is a drop-in replacement for Mirantis cri-dockerd, the CRI
// shim for Docker Engine, with arbitrary image pinning.
//
// The command holds nothing but main.go, which exits with the code app.Main
// returns; everything else is in internal/app.
package main
