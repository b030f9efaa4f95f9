package logs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
)

// LogFile is a container's CRI log file: Name below the pod's log directory Dir, as
// the CRI gives them (PodSandboxConfig.log_directory and ContainerConfig.log_path).
// Nothing below Dir is reached through a symbolic link: a writer of the pod's log
// directory (a container with it mounted, say) cannot make us write elsewhere.
type LogFile struct {
	// Dir is the pod's log directory, absolute ("/var/log/pods/ns_pod_uid").
	Dir string `json:"dir"`
	// Name is the log file's path below Dir ("app/0.log"): local, no "..".
	Name string `json:"name"`
}

// Path is the log file's whole path.
func (l LogFile) Path() string { return filepath.Join(l.Dir, l.Name) }

// Validate reports a LogFile that cannot be opened safely.
func (l LogFile) Validate() error {
	switch {
	case !filepath.IsAbs(l.Dir):
		return fmt.Errorf("pod log directory %q is not absolute: %w", l.Dir, errdefs.ErrInvalidArgument)
	case l.Name == "" || !filepath.IsLocal(l.Name):
		return fmt.Errorf("container log path %q is not below the pod log directory: %w", l.Name, errdefs.ErrInvalidArgument)
	}
	return nil
}

// opener opens files below a directory without following symbolic links.
type opener struct {
	// noOpenat2 forces the fallback walk (kernels before 5.6, seccomp filters that
	// refuse openat2; tests).
	noOpenat2 bool
}

// openLogFile opens (creating, mode 0640) the CRI log l for appending. A symbolic
// link at its place (upstream cri-dockerd links the CRI path to the engine's
// json-file log) is replaced by a regular file, so the engine's own log, or anything
// else, is never written to; a symbolic link anywhere else below l.Dir is refused.
func (o opener) openLogFile(l LogFile) (f *os.File, replacedLink bool, err error) {
	if err := l.Validate(); err != nil {
		return nil, false, err
	}
	const flags = unix.O_RDWR | unix.O_CREAT | unix.O_APPEND | unix.O_CLOEXEC
	f, err = o.openBeneath(l.Dir, l.Name, flags, 0o640)
	if !errors.Is(err, unix.ELOOP) {
		return f, false, err
	}
	// The last component may be a link: remove it (unlinkat does not follow it), then
	// create the file. A link in a directory component is refused.
	parent, perr := o.openBeneath(l.Dir, filepath.Dir(l.Name), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if perr != nil {
		return nil, false, err // the link is above the file
	}
	defer parent.Close()
	base := filepath.Base(l.Name)
	var st unix.Stat_t
	if err := unix.Fstatat(int(parent.Fd()), base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, false, fmt.Errorf("stat %s: %w", l.Path(), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		return nil, false, fmt.Errorf("open %s: %w", l.Path(), unix.ELOOP)
	}
	if err := unix.Unlinkat(int(parent.Fd()), base, 0); err != nil {
		return nil, false, fmt.Errorf("remove the symbolic link at %s: %w", l.Path(), err)
	}
	f, err = o.openBeneath(l.Dir, l.Name, flags, 0o640)
	return f, err == nil, err
}

// openRotated opens, read-only, a rotated sibling of l ("<name>.<timestamp>").
func (o opener) openRotated(l LogFile, sibling string) (*os.File, error) {
	return o.openBeneath(l.Dir, filepath.Join(filepath.Dir(l.Name), sibling), unix.O_RDONLY|unix.O_CLOEXEC, 0)
}

// openBeneath opens name below dir with flags, refusing symbolic links in any
// component of name and any escape from dir: openat2 with RESOLVE_BENEATH and
// RESOLVE_NO_SYMLINKS where the kernel has it, else a walk that opens one component
// at a time with O_NOFOLLOW. A link is refused with ELOOP (wrapped).
func (o opener) openBeneath(dir, name string, flags int, mode uint32) (*os.File, error) {
	root, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open pod log directory %s: %w", dir, err)
	}
	defer unix.Close(root)
	path := filepath.Join(dir, name)
	if !o.noOpenat2 {
		fd, err := unix.Openat2(root, name, &unix.OpenHow{
			Flags:   uint64(flags) | unix.O_NOFOLLOW,
			Mode:    uint64(mode),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		switch {
		case err == nil:
			return os.NewFile(uintptr(fd), path), nil
		case !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM):
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
	}
	return walkBeneath(root, name, path, flags, mode)
}

// walkBeneath is openBeneath's fallback: each directory component is opened with
// O_NOFOLLOW relative to the previous one, and the last with O_NOFOLLOW too.
func walkBeneath(root int, name, path string, flags int, mode uint32) (*os.File, error) {
	parts := strings.Split(filepath.Clean(name), string(filepath.Separator))
	cur := root
	defer func() {
		if cur != root {
			unix.Close(cur)
		}
	}()
	for _, part := range parts[:len(parts)-1] {
		if part == ".." {
			return nil, fmt.Errorf("open %s: %w", path, unix.EXDEV)
		}
		next, err := unix.Openat(cur, part, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", path, symlinkErr(cur, part, err))
		}
		if cur != root {
			unix.Close(cur)
		}
		cur = next
	}
	last := parts[len(parts)-1]
	if last == ".." {
		return nil, fmt.Errorf("open %s: %w", path, unix.EXDEV)
	}
	fd, err := unix.Openat(cur, last, flags|unix.O_NOFOLLOW, mode)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, symlinkErr(cur, last, err))
	}
	return os.NewFile(uintptr(fd), path), nil
}

// symlinkErr maps what openat answers for a symbolic link opened with O_NOFOLLOW
// (ENOTDIR for a directory component opened with O_DIRECTORY) to ELOOP, as openat2
// answers; other errors are returned as they are.
func symlinkErr(dir int, name string, err error) error {
	var st unix.Stat_t
	if errors.Is(err, unix.ENOTDIR) && unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil &&
		st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return unix.ELOOP
	}
	return err
}
