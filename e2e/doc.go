//go:build e2e

// Package e2e holds the end-to-end suite (go test -tags e2e): a real Docker Engine
// built from Go modules and started on private paths by hack/engine.sh, our real
// cri-dockerd binary on a private socket, a local registry on 127.0.0.1, and the
// clients kubelet's team uses (a CRI gRPC client, crictl). NRI plugins are written
// with NRI's pkg/stub. It never imports internal/core (depguard enforces it): it
// drives the real binary over the CRI socket.
package e2e
