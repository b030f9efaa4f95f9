package core

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// ListContainers lists the kubernetes containers matching the filter.
func (s *Service) ListContainers(ctx context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	cs, err := s.listContainers(ctx, req.GetFilter())
	if err != nil {
		return nil, err
	}
	out := make([]*runtimeapi.Container, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.cri)
	}
	s.logger(ctx).WithField("count", len(out)).Debug("listed containers")
	return &runtimeapi.ListContainersResponse{Containers: out}, nil
}

// listedContainer is one engine container with its CRI view.
type listedContainer struct {
	engine docker.Container
	cri    *runtimeapi.Container
}

// listContainers lists the kubernetes containers matching f.
func (s *Service) listContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]listedContainer, error) {
	lf := docker.ContainerFilter{ID: f.GetId(), Labels: map[string]string{}}
	for k, v := range f.GetLabelSelector() {
		lf.Labels[k] = v
	}
	lf.Labels[labelContainerType] = typeContainer
	if f.GetPodSandboxId() != "" {
		lf.Labels[labelSandboxID] = f.GetPodSandboxId()
	}
	if f.GetState() != nil && f.GetState().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
		lf.Running = true
	}
	cs, err := s.deps.Docker.ListContainers(ctx, lf)
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	out := make([]listedContainer, 0, len(cs))
	for _, c := range cs {
		if s.hidden(c.ID) {
			continue // its NRI plugins have not created it yet
		}
		md, err := containerMetadata(c)
		if err != nil {
			s.logger(ctx).WithError(err).Debug("skipping container with a foreign name")
			continue
		}
		state := stateOfContainer(c.State)
		if f.GetState() != nil && f.GetState().GetState() != state {
			continue
		}
		labels, annotations := splitLabels(c.Labels)
		out = append(out, listedContainer{engine: c, cri: &runtimeapi.Container{
			Id: c.ID, PodSandboxId: c.Labels[labelSandboxID], Metadata: md,
			Image: &runtimeapi.ImageSpec{Image: c.Image}, ImageRef: c.ImageID, ImageId: c.ImageID,
			State: state, CreatedAt: c.Created.UnixNano(), Labels: labels, Annotations: annotations,
		}})
	}
	return out, nil
}
