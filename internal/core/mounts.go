package core

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// checkMount refuses what the engine cannot do with a CRI mount: ID-mapped mounts (user
// namespaces, which Status reports unsupported) and extra mount options (the CRI's
// mount_options, which the engine's mounts do not carry).
func checkMount(m *runtimeapi.Mount) error {
	if len(m.GetUidMappings()) > 0 || len(m.GetGidMappings()) > 0 {
		return fmt.Errorf("mount %s: uidMappings and gidMappings (ID-mapped mounts for user namespaces) are not supported by docker: %w",
			m.GetContainerPath(), cerrdefs.ErrNotImplemented)
	}
	if len(m.GetMountOptions()) > 0 {
		return fmt.Errorf("mount %s: mount_options %q are not supported by docker: %w", m.GetContainerPath(), m.GetMountOptions(), cerrdefs.ErrNotImplemented)
	}
	return nil
}

// imageMount maps an image volume (a mount whose image is set, KEP-4639) onto the
// engine's image mount: always read-only, private, the image's root or its
// image_sub_path. The image is the one kubelet pulled (PullImage's image_ref); the
// engine fails the creation when it has no such image, and checkImageSubPath when
// the image has no such path.
func (s *Service) imageMount(m *runtimeapi.Mount) (docker.ImageMount, error) {
	if !s.cfg.ImageVolumes {
		return docker.ImageMount{}, fmt.Errorf("mount %s: image volumes need Docker Engine 28 or later (API 1.48, image mounts): %w",
			m.GetContainerPath(), cerrdefs.ErrNotImplemented)
	}
	if m.GetImageSubPath() != "" && !s.cfg.ImageVolumeSubpaths {
		return docker.ImageMount{}, fmt.Errorf("mount %s: image_sub_path needs Docker Engine 28.5 or later (API 1.51): %w",
			m.GetContainerPath(), cerrdefs.ErrNotImplemented)
	}
	if !m.GetReadonly() {
		return docker.ImageMount{}, fmt.Errorf("mount %s: an image volume is read-only; readonly must be set: %w", m.GetContainerPath(), cerrdefs.ErrInvalidArgument)
	}
	if p := m.GetPropagation(); p != runtimeapi.MountPropagation_PROPAGATION_PRIVATE {
		return docker.ImageMount{}, fmt.Errorf("mount %s: an image volume takes no mount propagation (propagation %s): %w",
			m.GetContainerPath(), p, cerrdefs.ErrInvalidArgument)
	}
	if sub := m.GetImageSubPath(); sub != "" && (path.IsAbs(sub) || !fs.ValidPath(path.Clean(sub))) {
		return docker.ImageMount{}, fmt.Errorf("mount %s: image_sub_path %q must be a relative path inside the image, without '..': %w",
			m.GetContainerPath(), sub, cerrdefs.ErrInvalidArgument)
	}
	return docker.ImageMount{Image: m.GetImage().GetImage(), Target: m.GetContainerPath(), SubPath: m.GetImageSubPath()}, nil
}

// checkImageSubPath refuses an image volume whose image_sub_path its image lacks. The
// engine would accept the container and fail only its start; kubelet (and critest)
// expect the create to fail, as containerd's does. A container of the image, created
// and never started, lets the engine stat the path in the image's filesystem; it is
// removed at once. Its own layer adds what the engine puts in every container
// (/etc/hosts, /dev, /proc ...), so such paths pass here even when the image lacks
// them, and the start fails instead.
func (s *Service) checkImageSubPath(ctx context.Context, im docker.ImageMount) error {
	if im.SubPath == "" {
		return nil
	}
	return timed(ctx, "imagevolume.subpath", func() error {
		id, err := s.deps.Docker.CreateContainer(ctx, docker.ContainerSpec{
			Image:       im.Image,
			Entrypoint:  []string{"/.dockpin-subpath-check"}, // never started
			NetworkMode: modeNone,
			Labels:      map[string]string{labelSubPathCheck: im.Target},
		})
		if err != nil {
			return fmt.Errorf("mount %s: check image_sub_path %q in image %s: %w", im.Target, im.SubPath, im.Image, err)
		}
		defer func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
			defer cancel()
			if err := ignoreNotFound(s.deps.Docker.RemoveContainer(rctx, id)); err != nil {
				s.logger(ctx).WithError(err).WithField("container", id).Warn("cannot remove the container that checked an image_sub_path")
			}
		}()
		ok, err := s.deps.Docker.PathExists(ctx, id, "/"+path.Clean(im.SubPath))
		if err != nil {
			return fmt.Errorf("mount %s: check image_sub_path %q in image %s: %w", im.Target, im.SubPath, im.Image, err)
		}
		if !ok {
			return fmt.Errorf("mount %s: image_sub_path %q does not exist in image %s: %w", im.Target, im.SubPath, im.Image, cerrdefs.ErrInvalidArgument)
		}
		return nil
	})
}

// imageVolumeStatus reports a container's image volumes as ContainerStatus mounts: the
// image as asked for, and as image_ref its ID (which kubelet's image_ref from PullImage
// is already; a name is looked up, and left out when the image is gone).
func (s *Service) imageVolumeStatus(ctx context.Context, mounts []docker.ImageMount) []*runtimeapi.Mount {
	var out []*runtimeapi.Mount
	for _, m := range mounts {
		ref := m.Image
		if !strings.HasPrefix(ref, "sha256:") {
			ref = ""
			if img, err := s.deps.Docker.InspectImage(ctx, m.Image); err == nil {
				ref = img.ID
			}
		}
		out = append(out, &runtimeapi.Mount{
			ContainerPath: m.Target, Readonly: true, ImageSubPath: m.SubPath,
			Image: &runtimeapi.ImageSpec{Image: m.Image, ImageRef: ref},
		})
	}
	return out
}
