// Package logctx carries the request logger in a context, in the spirit of
// containerd's log.G(ctx): the gRPC interceptor puts a logger with the request's
// method and id into the request's context, and every package that works for the
// request (core, network, logs, pinning, the image cache) logs through it, so each
// line names the request it belongs to. Work done outside a request logs to the
// component's own logger.
package logctx
