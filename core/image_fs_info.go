package core

import (
	"context"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ImageFsInfo reports the space the engine's images use.
func (s *Service) ImageFsInfo(ctx context.Context, _ *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	usage, err := s.docker.ImageFsUsage(ctx)
	if err != nil {
		return nil, err
	}
	fs := &runtimeapi.FilesystemUsage{
		Timestamp: time.Now().UnixNano(),
		FsId:      &runtimeapi.FilesystemIdentifier{Mountpoint: usage.Mountpoint},
		UsedBytes: &runtimeapi.UInt64Value{Value: usage.UsedBytes},
	}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{fs}}, nil
}
