package core

import (
	"context"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ImageFsInfo reports the space the engine's images use, and apart from it the space its
// containers' writable layers use (container_filesystems, for kubelet's split image
// filesystem); both live under the engine's data root, so they name the same mountpoint
// and report the same inodes in use (the filesystem's, when it counts them).
func (s *Service) ImageFsInfo(ctx context.Context, _ *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	usage, err := s.deps.Docker.ImageFsUsage(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now().UnixNano()
	fs := func(used uint64) *runtimeapi.FilesystemUsage {
		u := &runtimeapi.FilesystemUsage{
			Timestamp: now,
			FsId:      &runtimeapi.FilesystemIdentifier{Mountpoint: usage.Mountpoint},
			UsedBytes: &runtimeapi.UInt64Value{Value: used},
		}
		if usage.InodesUsed > 0 {
			u.InodesUsed = &runtimeapi.UInt64Value{Value: usage.InodesUsed}
		}
		return u
	}
	return &runtimeapi.ImageFsInfoResponse{
		ImageFilesystems:     []*runtimeapi.FilesystemUsage{fs(usage.UsedBytes)},
		ContainerFilesystems: []*runtimeapi.FilesystemUsage{fs(usage.ContainersUsedBytes)},
	}, nil
}
