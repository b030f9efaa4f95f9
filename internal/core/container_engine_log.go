package core

import (
	"context"
	"strconv"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// EngineLogLimits bound the engine's own log of a container whose output is also
// copied into its CRI log file (kubelet reads only that one): without them every line
// is kept twice on disk, the engine's copy unbounded unless daemon.json bounds it.
// The log copier follows the engine's log through its API, which reads across the
// engine's rotations.
type EngineLogLimits struct {
	// MaxSize is the engine's max-size log option ("10m"); "" leaves the engine's
	// log configuration as it is.
	MaxSize string
	// MaxFiles is the engine's max-file log option: how many files, the live one
	// included, the engine keeps.
	MaxFiles int
}

// engineLogConfig is the log configuration of a container whose output is copied
// into a CRI log file: the engine's default driver with the limits when that driver
// rotates by max-size and max-file and its log is readable through the engine's API
// (json-file, local); nil (the engine's default, unchanged) otherwise, or when the
// limits are off or the engine's driver is unknown.
func (s *Service) engineLogConfig(ctx context.Context) *docker.LogConfig {
	lim := s.cfg.EngineLog
	if lim.MaxSize == "" {
		return nil
	}
	info, err := s.engineInfo(ctx)
	if err != nil {
		s.logger(ctx).WithError(err).Debug("engine log driver unknown: the container keeps the engine's log configuration")
		return nil
	}
	switch info.LoggingDriver {
	case "json-file", "local":
	default:
		s.logger(ctx).WithField("driver", info.LoggingDriver).Debug("engine log driver without max-size: the container keeps the engine's log configuration")
		return nil
	}
	return &docker.LogConfig{Type: info.LoggingDriver, Config: map[string]string{
		"max-size": lim.MaxSize,
		"max-file": strconv.Itoa(lim.MaxFiles),
	}}
}
