// Package logctx carries the request logger in a context, in the spirit of
// containerd's log.G(ctx): the gRPC interceptor puts a logger with the request's
// method and id into the request's context, and every package that works for the
// request (core, network, logs, pinning, the image cache) logs through it, so each
// line names the request it belongs to. Work done outside a request logs to the
// component's own logger.
//
// With puts the logger in a context and G takes it out; For(ctx, componentLogger)
// gives a component's work for a request the request's logger with the component's
// fields; OrDiscard turns a nil logger into one that discards. WithPhases and
// Time(ctx, name) add up the time a request spends in each phase (an engine call, a
// CNI plugin, a file write), which the interceptor logs at debug level with the
// request. The package imports only logrus: a leaf that every package of this module
// may import (depguard keeps core and pinning out of it).
package logctx
