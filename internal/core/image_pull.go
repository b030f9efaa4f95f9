package core

import (
	"context"
	"errors"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crierrors "k8s.io/cri-api/pkg/errors"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
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
	var img docker.Image
	for attempt := 1; ; attempt++ {
		var gone bool
		img, gone, err = s.pullOnce(ctx, ref, opts)
		// Another client (kubelet's GC, a parallel RemoveImage) can remove the image
		// between the pull and the inspect that names it: pull it again.
		if !gone || attempt == pullAttempts {
			break
		}
		s.logger(ctx).WithField("image", ref).Warn("image removed right after its pull, pulling it again")
	}
	if err != nil {
		return nil, err
	}
	s.logger(ctx).WithField("image", ref).WithField("id", img.ID).Info("pulled image")
	return &runtimeapi.PullImageResponse{ImageRef: img.ID}, nil
}

// pullAttempts bounds the pulls of one PullImage when the image keeps being removed
// right after it was pulled.
const pullAttempts = 3

// pullOnce pulls ref and returns the image it now names; gone is true when the pull
// succeeded but the image was removed before it could be inspected.
func (s *Service) pullOnce(ctx context.Context, ref string, opts docker.PullOptions) (img docker.Image, gone bool, err error) {
	if err := s.deps.Docker.PullImage(ctx, ref, opts); err != nil {
		if errors.Is(err, docker.ErrRegistryUnreachable) {
			// kubelet recognises this prefix and reports the registry as unavailable.
			return img, false, fmt.Errorf("%s: %w", crierrors.ErrRegistryUnavailable.Error(), err)
		}
		return img, false, err
	}
	if img, err = s.deps.Docker.InspectImage(ctx, ref); err != nil {
		return img, cerrdefs.IsNotFound(err), fmt.Errorf("inspect pulled image %s: %w", ref, err)
	}
	return img, false, nil
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
