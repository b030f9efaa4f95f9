package core

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// ContainerStatus reports a container's state; NotFound when there is none.
func (s *Service) ContainerStatus(ctx context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	c, md, err := s.containerWithMetadata(ctx, req.GetContainerId())
	if err != nil {
		return nil, err
	}
	if s.hidden(c.ID) {
		return nil, fmt.Errorf("container %q not found (its NRI plugins have not created it yet): %w", req.GetContainerId(), cerrdefs.ErrNotFound)
	}
	labels, annotations := splitLabels(c.Labels)
	image, imageRef := s.statusImage(ctx, c)
	st := &runtimeapi.ContainerStatus{
		Id: c.ID, Metadata: md, State: stateOfContainer(c.State),
		CreatedAt: nanos(c.Created), StartedAt: nanos(c.StartedAt), FinishedAt: nanos(c.FinishedAt),
		ExitCode: int32(c.ExitCode), // exit codes fit in int32
		Image:    &runtimeapi.ImageSpec{Image: image}, ImageRef: imageRef, ImageId: c.ImageID,
		Labels: labels, Annotations: annotations, LogPath: c.Labels[labelLogPath],
		Resources: criResources(c.Resources),
	}
	if st.State == runtimeapi.ContainerState_CONTAINER_CREATED && c.ExitCode != 0 {
		// The engine could not start it (no such executable, a bad mount): it stays
		// "created" with an exit code. kubelet would start a CREATED container again
		// forever, whatever the pod's restart policy; report it as upstream does.
		st.State = runtimeapi.ContainerState_CONTAINER_EXITED
		st.StartedAt, st.FinishedAt = st.CreatedAt, st.CreatedAt
		st.Reason = "ContainerCannotRun"
	} else if st.State == runtimeapi.ContainerState_CONTAINER_EXITED {
		s.drainLog(ctx, c.ID, st.LogPath)
		switch {
		case c.OOMKilled:
			st.Reason = "OOMKilled"
		case c.ExitCode == 0:
			st.Reason = "Completed"
		default:
			st.Reason = "Error"
		}
	}
	if st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		st.Message = c.Error
	}
	for _, m := range c.Mounts {
		st.Mounts = append(st.Mounts, &runtimeapi.Mount{
			ContainerPath: m.Target, HostPath: m.Source, Readonly: m.ReadOnly,
			Propagation: criPropagation(m.Propagation),
		})
	}
	st.Mounts = append(st.Mounts, s.imageVolumeStatus(ctx, c.ImageMounts)...)
	resp := &runtimeapi.ContainerStatusResponse{Status: st}
	if req.GetVerbose() {
		info, err := json.Marshal(map[string]any{
			"pid": c.Pid, "sandboxID": c.Labels[labelSandboxID], "networkMode": c.NetworkMode,
			"pidMode": c.PidMode, "ipcMode": c.IpcMode, "user": c.User, "engineLogPath": c.LogPath,
		})
		if err != nil {
			return nil, fmt.Errorf("verbose info of container %s: %w", c.ID, err)
		}
		resp.Info = map[string]string{"info": string(info)}
	}
	return resp, nil
}

// logDrainTimeout bounds how long ContainerStatus waits for an exited container's
// last output to reach its CRI log file.
const logDrainTimeout = 2 * time.Second

// drainLog waits until an exited container's output is all in its CRI log file, so
// that whoever reads the log after seeing the container exited (kubelet's termination
// message, `crictl logs`) finds all of it, as with a log the engine writes itself.
func (s *Service) drainLog(ctx context.Context, id, path string) {
	if s.deps.Logs == nil || path == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, logDrainTimeout)
	defer cancel()
	if err := s.deps.Logs.Wait(ctx, id); err != nil && ctx.Err() != nil {
		s.logger(ctx).WithError(err).WithField("container", id).Debug("container log not drained in time")
	}
}

// statusImage returns the image a container's status names, as upstream: the image's
// first tag (kubelet creates containers from image IDs), and its reference as
// "docker-pullable://<repo digest>", or "docker://<id>" for an image pulled by no
// digest. ImageId carries the plain ID the CRI asks for.
func (s *Service) statusImage(ctx context.Context, c docker.ContainerDetails) (image, ref string) {
	image, ref = c.Image, "docker://"+c.ImageID
	img, err := s.deps.Docker.InspectImage(ctx, c.ImageID)
	if err != nil {
		s.logger(ctx).WithError(err).WithField("container", c.ID).Debug("cannot inspect the container's image")
		return image, ref
	}
	if len(img.RepoTags) > 0 {
		image = img.RepoTags[0]
	}
	if len(img.RepoDigests) > 0 {
		ref = "docker-pullable://" + img.RepoDigests[0]
	}
	return image, ref
}
