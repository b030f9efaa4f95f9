// Package streaming owns the CRI streaming server behind Exec, Attach and
// PortForward: it hands out one-time URLs for kubelet (which proxies `kubectl exec`,
// `attach` and `port-forward` to them) and serves them with the kubelet streaming
// library (k8s.io/cri-streaming), over SPDY and WebSocket. Exec and attach run
// through the engine's exec and attach APIs, with terminal resizes passed on and a
// command's exit status returned to the client; port-forward dials the port on
// loopback from inside the pod sandbox's network namespace (entered with setns on a
// locked OS thread, as containerd does; upstream runs nsenter and socat instead).
// The server listens on --streaming-bind-addr; by default on 127.0.0.1 only, with a
// random port.
package streaming
