// Package pinproxy is the pin proxy: a CRI endpoint in front of an unmodified
// cri-dockerd (the backend) that forwards every RPC, unary or streaming, known to this
// build or not, as raw frames, except ListImages and ImageStatus, whose images are
// also reported pinned when our pin sources pin them. The pin decisions need image
// config labels, which the CRI does not carry: the proxy reads them from the engine.
//
// cri-dockerd runs it with --pin-proxy-backend. It is a gRPC server with no service
// registered, whose unknown-service handler takes every RPC; frames pass through
// undecoded (codec.go), so RPCs this build does not know pass unchanged. images.go
// answers ListImages and ImageStatus: an image is pinned when the backend pins it OR
// our Pinner does, deciding with the config labels the Engine interface gives by image
// ID. The fail-safe rule holds here too: when the Pinner's Evaluate refuses (a pin
// source without usable state), ListImages answers Unavailable rather than list pinned
// images unpinned. Verbose Status carries our pinning state as well.
//
// The proxy never imports internal/core, not even internal/core/docker (depguard enforces
// it): internal/app adapts the engine to the Engine interface.
package pinproxy
