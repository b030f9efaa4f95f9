// Package core implements the CRI runtime.v1 RuntimeService and ImageService on
// top of Docker Engine, one file per RPC. It talks to the engine only through the
// docker.Client interface and decides pinning only through the Pinner interface;
// it returns errors carrying containerd errdefs kinds, which the gRPC server
// converts to status codes in one interceptor.
package core
