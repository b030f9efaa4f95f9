package core

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// The names inside a checkpoint archive, as containerd and CRI-O write them and
// checkpointctl reads them.
const (
	checkpointImagesDir   = "checkpoint"      // CRIU's images of the processes
	checkpointConfigFile  = "config.dump"     // checkpointConfig
	checkpointSpecFile    = "spec.dump"       // the container's OCI runtime spec
	checkpointRootfsDiff  = "rootfs-diff.tar" // files the writable layer added or changed
	checkpointDeletedFile = "deleted.files"   // JSON list of paths it deleted
)

// checkpointConfig is config.dump: which container and image a checkpoint is of.
type checkpointConfig struct {
	ID              string    `json:"id"`
	Name            string    `json:"name"`
	RootfsImage     string    `json:"rootfsImage,omitempty"`
	RootfsImageRef  string    `json:"rootfsImageRef,omitempty"`
	RootfsImageName string    `json:"rootfsImageName,omitempty"`
	OCIRuntime      string    `json:"runtime,omitempty"`
	CreatedTime     time.Time `json:"createdTime"`
	CheckpointedAt  time.Time `json:"checkpointedTime"`
	RestoredAt      time.Time `json:"restoredTime"`
	Restored        bool      `json:"restored"`
}

// CheckpointContainer writes a checkpoint of a running container to the archive
// req.Location (kubelet's /checkpoint endpoint, KEP-2008): the engine's CRIU
// checkpoint of its processes, which go on running, with the container's config,
// OCI spec and writable-layer changes, laid out as containerd and CRI-O write it.
// It needs an engine with experimental features and criu, and the container's
// runtime bundle on this host; FailedPrecondition names what is missing.
func (s *Service) CheckpointContainer(ctx context.Context, req *runtimeapi.CheckpointContainerRequest) (*runtimeapi.CheckpointContainerResponse, error) {
	loc := req.GetLocation()
	if loc == "" || !filepath.IsAbs(loc) {
		return nil, fmt.Errorf("checkpoint location %q is not an absolute path: %w", loc, cerrdefs.ErrInvalidArgument)
	}
	c, err := s.runningContainer(ctx, req.GetContainerId())
	if err != nil {
		return nil, err
	}
	if err := s.checkpointsAvailable(ctx); err != nil {
		return nil, fmt.Errorf("checkpoint container %s: %w", c.ID, err)
	}
	if t := req.GetTimeout(); t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(t)*time.Second)
		defer cancel()
	}
	image, _ := s.statusImage(ctx, c)
	spec, err := s.host.spec(c.Pid, c.ID)
	if err != nil {
		return nil, fmt.Errorf("checkpoint container %s: its runtime bundle is not readable on this host (%w): %w", c.ID, err, cerrdefs.ErrFailedPrecondition)
	}
	if spec, err = checkpointSpec(spec, c, image); err != nil {
		return nil, fmt.Errorf("checkpoint container %s: %w", c.ID, err)
	}
	work, err := os.MkdirTemp(filepath.Dir(loc), ".checkpoint-")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("checkpoint location %s: its directory does not exist: %w", loc, cerrdefs.ErrInvalidArgument)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint container %s: %w", c.ID, err)
	}
	defer func() {
		if err := os.RemoveAll(work); err != nil {
			s.logger(ctx).WithError(err).Warn("cannot remove a checkpoint's work directory")
		}
	}()
	const name = "cri"
	if err := s.deps.Docker.CheckpointContainer(ctx, c.ID, work, name); err != nil {
		return nil, fmt.Errorf("checkpoint container %s: %w", c.ID, err)
	}
	at := time.Now().UTC()
	changes, err := s.deps.Docker.ContainerChanges(ctx, c.ID)
	if err != nil {
		return nil, fmt.Errorf("checkpoint container %s: %w", c.ID, err)
	}
	cfg, err := json.Marshal(checkpointConfig{
		ID: c.ID, Name: c.Labels[labelContainerName], RootfsImage: image, RootfsImageRef: c.ImageID,
		RootfsImageName: image, OCIRuntime: runtimeName(c.Runtime), CreatedTime: c.Created, CheckpointedAt: at,
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoint container %s: %w", c.ID, err)
	}
	err = timed(ctx, "archive", func() error {
		return writeCheckpoint(loc, work, checkpointParts{
			images: filepath.Join(work, name), config: cfg, spec: spec,
			root: s.host.root(c.Pid), changes: changes,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoint container %s: %w", c.ID, err)
	}
	s.logger(ctx).WithField("container", c.ID).WithField("location", loc).Info("checkpoint written")
	return &runtimeapi.CheckpointContainerResponse{}, nil
}

// runtimeName is the OCI runtime a container runs with: the engine's default is runc.
func runtimeName(name string) string {
	if name == "" {
		return "runc"
	}
	return name
}

// checkpointsAvailable fails FailedPrecondition when the engine runs without the
// experimental features its checkpoints need.
func (s *Service) checkpointsAvailable(ctx context.Context) error {
	info, err := s.engineInfo(ctx)
	if err != nil {
		return err
	}
	if !info.Experimental {
		return fmt.Errorf("the Docker Engine runs without experimental features, which its checkpoints need (dockerd --experimental, or \"experimental\": true in daemon.json; and criu installed): %w",
			cerrdefs.ErrFailedPrecondition)
	}
	return nil
}

// checkpointStatus is verbose Status' "checkpoints": whether CheckpointContainer can
// work, and what is missing when not.
func (s *Service) checkpointStatus(ctx context.Context) map[string]any {
	out := map[string]any{"available": false}
	if err := s.checkpointsAvailable(ctx); err != nil {
		out["missing"] = err.Error()
		return out
	}
	criu, err := s.host.criu()
	if err != nil {
		out["missing"] = "criu: " + err.Error()
		return out
	}
	out["available"], out["criu"] = true, criu
	return out
}

// checkpointSpec returns the OCI spec spec with the CRI annotations containerd
// writes into a container's spec (which checkpointctl shows) added from c's labels
// and its image's name where the engine set none.
func checkpointSpec(spec []byte, c docker.ContainerDetails, image string) ([]byte, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(spec, &doc); err != nil {
		return nil, fmt.Errorf("the runtime bundle's config.json: %w", err)
	}
	ann := map[string]string{}
	if raw, ok := doc["annotations"]; ok {
		if err := json.Unmarshal(raw, &ann); err != nil {
			return nil, fmt.Errorf("the runtime bundle's config.json annotations: %w", err)
		}
	}
	for k, v := range map[string]string{
		"io.kubernetes.cri.container-type":    "container",
		"io.kubernetes.cri.container-name":    c.Labels[labelContainerName],
		"io.kubernetes.cri.sandbox-id":        c.Labels[labelSandboxID],
		"io.kubernetes.cri.sandbox-name":      c.Labels[labelPodName],
		"io.kubernetes.cri.sandbox-namespace": c.Labels[labelPodNamespace],
		"io.kubernetes.cri.sandbox-uid":       c.Labels[labelPodUID],
		"io.kubernetes.cri.image-name":        image,
	} {
		if _, set := ann[k]; !set && v != "" {
			ann[k] = v
		}
	}
	raw, err := json.Marshal(ann)
	if err != nil {
		return nil, err
	}
	doc["annotations"] = raw
	return json.Marshal(doc)
}

// checkpointParts is what a checkpoint archive is made of.
type checkpointParts struct {
	images  string // the directory of CRIU's images
	config  []byte // config.dump
	spec    []byte // spec.dump
	root    string // the container's root filesystem as this host sees it
	changes []docker.FileChange
}

// writeCheckpoint writes the archive at loc (through a file in work, renamed once
// complete, so that loc never holds half an archive).
func writeCheckpoint(loc, work string, p checkpointParts) error {
	tmp := filepath.Join(work, "archive.tar")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = writeCheckpointTar(f, work, p)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, loc)
}

func writeCheckpointTar(w io.Writer, work string, p checkpointParts) error {
	tw := tar.NewWriter(w)
	if err := addTarDir(tw, checkpointImagesDir, p.images); err != nil {
		return fmt.Errorf("the checkpoint's images: %w", err)
	}
	diff, deleted, err := rootfsDiff(work, p.root, p.changes)
	if err != nil {
		return err
	}
	if err := writeTarFile(tw, checkpointConfigFile, p.config); err != nil {
		return err
	}
	if err := writeTarFile(tw, checkpointSpecFile, p.spec); err != nil {
		return err
	}
	if len(deleted) > 0 {
		raw, err := json.Marshal(deleted)
		if err != nil {
			return err
		}
		if err := writeTarFile(tw, checkpointDeletedFile, raw); err != nil {
			return err
		}
	}
	if err := addTarFile(tw, checkpointRootfsDiff, diff); err != nil {
		return err
	}
	return tw.Close()
}

// rootfsDiff writes, into a file in work, a tar of the paths changes says the
// writable layer added or modified, read under root; it returns that file and the
// deleted paths. The paths are resolved inside root (os.Root): a directory the
// container swapped for a symbolic link since the change list was read cannot lead
// to the host's files.
func rootfsDiff(work, root string, changes []docker.FileChange) (string, []string, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return "", nil, fmt.Errorf("the container's root filesystem: %w", err)
	}
	defer r.Close()
	name := filepath.Join(work, checkpointRootfsDiff)
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	var deleted []string
	for _, ch := range changes {
		rel := strings.TrimPrefix(filepath.Clean("/"+ch.Path), "/")
		if rel == "" {
			continue
		}
		if ch.Kind == docker.ChangeDeleted {
			deleted = append(deleted, rel)
			continue
		}
		if err := addRootfsEntry(tw, r, rel); err != nil {
			return "", nil, fmt.Errorf("the writable layer's %s: %w", ch.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return "", nil, err
	}
	return name, deleted, f.Close()
}

// addRootfsEntry adds rel of root as rel: a directory or symbolic link as itself, a
// regular file with its content; a path gone since the change list was read is
// left out.
func addRootfsEntry(tw *tar.Writer, root *os.Root, rel string) error {
	fi, err := root.Lstat(rel)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	link := ""
	if fi.Mode()&os.ModeSymlink != 0 {
		if link, err = root.Readlink(rel); err != nil {
			return err
		}
	}
	hdr, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return err
	}
	hdr.Name = rel
	if fi.IsDir() {
		hdr.Name += "/"
	}
	if !fi.Mode().IsRegular() {
		return tw.WriteHeader(hdr)
	}
	src, err := root.Open(rel)
	if err != nil {
		return err
	}
	defer src.Close()
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = io.CopyN(tw, src, hdr.Size)
	return err
}

func writeTarFile(tw *tar.Writer, name string, data []byte) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(data)), ModTime: time.Now()}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

// addTarDir adds directory dir as name, with its regular files and directories.
func addTarDir(tw *tar.Writer, name, dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		entry := filepath.ToSlash(filepath.Join(name, rel))
		switch {
		case d.IsDir():
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: entry + "/", Mode: 0o700, ModTime: time.Now()})
		case d.Type().IsRegular():
			return addTarFile(tw, entry, path)
		}
		return nil
	})
}

// addTarFile adds the file at path as name.
func addTarFile(tw *tar.Writer, name, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: fi.Size(), ModTime: fi.ModTime()}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}
