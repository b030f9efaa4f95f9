package core

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ContainerStatus reports a container's state; NotFound when there is none.
func (s *Service) ContainerStatus(ctx context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	c, err := s.containerInspect(ctx, req.GetContainerId())
	if err != nil {
		return nil, err
	}
	md, err := containerMetadata(c.Container)
	if err != nil {
		return nil, err
	}
	labels, annotations := splitLabels(c.Labels)
	st := &runtimeapi.ContainerStatus{
		Id: c.ID, Metadata: md, State: stateOfContainer(c.State),
		CreatedAt: nanos(c.Created), StartedAt: nanos(c.StartedAt), FinishedAt: nanos(c.FinishedAt),
		ExitCode: int32(c.ExitCode), //nolint:gosec // exit codes fit
		Image:    &runtimeapi.ImageSpec{Image: c.Image}, ImageRef: c.ImageID, ImageId: c.ImageID,
		Labels: labels, Annotations: annotations, LogPath: c.Labels[labelLogPath],
		Resources: criResources(c.Resources),
	}
	if st.State == runtimeapi.ContainerState_CONTAINER_EXITED {
		s.drainLog(ctx, c.ID, st.LogPath)
		switch {
		case c.OOMKilled:
			st.Reason = "OOMKilled"
		case c.ExitCode == 0:
			st.Reason = "Completed"
		default:
			st.Reason = "Error"
		}
		st.Message = c.Error
	}
	for _, m := range c.Mounts {
		st.Mounts = append(st.Mounts, &runtimeapi.Mount{
			ContainerPath: m.Target, HostPath: m.Source, Readonly: m.ReadOnly,
			Propagation: criPropagation(m.Propagation),
		})
	}
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
	if s.cfg.Logs == nil || path == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, logDrainTimeout)
	defer cancel()
	if err := s.cfg.Logs.Wait(ctx, id); err != nil && ctx.Err() != nil {
		s.logger(ctx).WithError(err).WithField("container", id).Debug("container log not drained in time")
	}
}
