package core

import (
	"context"
	"errors"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crierrors "k8s.io/cri-api/pkg/errors"

	"github.com/dockpin/cri-dockerd/core/docker"
)

// PullImage pulls an image and returns its ID, the same identifier that
// ListImages and ImageStatus report.
func (s *Service) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref, err := imageRef(req.GetImage())
	if err != nil {
		return nil, err
	}
	opts := docker.PullOptions{Auth: criAuth(req.GetAuth()), ProgressDeadline: s.cfg.ImagePullProgressDeadline}
	s.logger(ctx).WithField("image", ref).Info("pulling image")
	restorePin := func(context.Context) {}
	if s.cfg.PinKeeper != nil {
		restorePin = s.cfg.PinKeeper.KeepPin(ctx, ref)
	}
	if err := s.docker.PullImage(ctx, ref, opts); err != nil {
		if errors.Is(err, docker.ErrRegistryUnreachable) {
			// kubelet recognises this prefix and reports the registry as unavailable.
			return nil, fmt.Errorf("%s: %w", crierrors.ErrRegistryUnavailable.Error(), err)
		}
		return nil, err
	}
	restorePin(ctx)
	img, err := s.docker.InspectImage(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("inspect pulled image %s: %w", ref, err)
	}
	s.logger(ctx).WithField("image", ref).WithField("id", img.ID).Info("pulled image")
	return &runtimeapi.PullImageResponse{ImageRef: img.ID}, nil
}

func criAuth(a *runtimeapi.AuthConfig) *docker.AuthConfig {
	if a == nil {
		return nil
	}
	return &docker.AuthConfig{
		Username:      a.Username,
		Password:      a.Password,
		Auth:          a.Auth,
		ServerAddress: a.ServerAddress,
		IdentityToken: a.IdentityToken,
		RegistryToken: a.RegistryToken,
	}
}
