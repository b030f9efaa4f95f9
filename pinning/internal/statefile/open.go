package statefile

import (
	"fmt"
	"os"
	"syscall"
)

// OpenRegular opens path for reading only if it is a regular file. It never blocks:
// a FIFO or a device put in a file's place since the directory was listed is opened
// with O_NONBLOCK and refused, instead of stalling the reader (and the locks it holds)
// until something writes to it; O_NONBLOCK changes nothing for a regular file. With
// follow false a symbolic link is refused too (O_NOFOLLOW): the preload directory
// takes regular files only.
func OpenRegular(path string, follow bool) (*os.File, error) {
	flags := os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_CLOEXEC
	if !follow {
		flags |= syscall.O_NOFOLLOW
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		_ = f.Close()
		return nil, fmt.Errorf("%s: not a regular file (%s)", path, st.Mode().Type())
	}
	return f, nil
}
