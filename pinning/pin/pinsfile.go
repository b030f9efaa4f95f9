package pin

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dockpin/cri-dockerd/pinning/internal/statefile"
)

// maxPinsFileBytes bounds one pins file: a file is checked against it before it is
// read, and a larger one is refused (with the previous pins kept), never read whole.
const maxPinsFileBytes = 8 << 20

// CheckPinsFile validates the pins file at path as Reload would read it, without
// touching a running daemon (cri-dockerd --check-pins-file, ExecReload-style tooling).
// It returns the number of patterns, or an error naming each bad line.
func CheckPinsFile(path string) (int, error) {
	patterns, err := loadPinsFile(path)
	return len(patterns), err
}

// CheckPins validates the pins file (file, "" = none) and the pins directory (dir,
// "" = none) as Reload reads them. It returns the files read and the number of
// patterns, or an error naming each bad file and line.
func CheckPins(file, dir string) (files []string, patterns int, err error) {
	ps, files, err := LoadPins(file, dir)
	return files, len(ps), err
}

// LoadPins reads the pins file (file, "" = none) and every pins file of the directory
// dir ("" = none; missing = none), in name order: their patterns, one list, and the
// files read. Any bad file fails the whole load, so that the previous pins stay.
func LoadPins(file, dir string) ([]Pattern, []string, error) {
	var (
		out   []Pattern
		files []string
		errs  []error
	)
	if file != "" {
		files = append(files, file)
	}
	if dir != "" {
		names, err := PinsDirFiles(dir)
		if err != nil {
			return nil, nil, err
		}
		for _, n := range names {
			files = append(files, filepath.Join(dir, n))
		}
	}
	for _, f := range files {
		ps, err := loadPinsFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, ps...)
	}
	if len(errs) > 0 {
		return nil, files, errors.Join(errs...)
	}
	return out, files, nil
}

// PinsDirFiles lists the pins files of dir in name order: every entry whose name does
// not start with "." and is not an editor's or a package manager's leftover, and which
// is a regular file or a link to one (a ConfigMap volume links each key into
// ..data). A directory that does not exist has none.
func PinsDirFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read pins directory: %w", err)
	}
	var out []string
	for _, e := range entries {
		if !isPinsFileName(e.Name()) {
			continue
		}
		st, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since the listing, or a dangling link
			}
			return nil, fmt.Errorf("pins directory: %w", err)
		}
		if st.Mode().IsRegular() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// isPinsFileName tells whether a name in the pins directory is a pins file: not
// hidden, not a backup (~, .bak, .swp) nor a package manager's copy (.dpkg-*,
// .rpmnew, .rpmsave, .rpmorig, .ucf-*).
func isPinsFileName(name string) bool {
	if strings.HasPrefix(name, ".") || strings.HasSuffix(name, "~") {
		return false
	}
	ext := filepath.Ext(name)
	switch {
	case ext == ".bak", ext == ".swp", ext == ".rpmnew", ext == ".rpmsave", ext == ".rpmorig",
		strings.HasPrefix(ext, ".dpkg-"), strings.HasPrefix(ext, ".ucf-"):
		return false
	}
	return true
}

// loadPinsFile reads and parses a pins file, refusing one over maxPinsFileBytes before
// reading it.
func loadPinsFile(path string) ([]Pattern, error) {
	f, err := statefile.OpenRegular(path, true)
	if err != nil {
		return nil, fmt.Errorf("read pins file: %w", err)
	}
	defer func() { _ = f.Close() }() // read-only: a close error loses nothing
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read pins file: %w", err)
	}
	if st.Size() > maxPinsFileBytes {
		return nil, fmt.Errorf("pins file %q: %d bytes, more than the %d a pins file may have", path, st.Size(), maxPinsFileBytes)
	}
	return parsePins(path, io.LimitReader(f, maxPinsFileBytes+1))
}

// parsePins parses pins file content: one pattern per line, "#" comments (whole
// line, or after whitespace), blank lines ignored. Any bad line rejects the file.
func parsePins(path string, r io.Reader) ([]Pattern, error) {
	var (
		out  []Pattern
		errs []error
		line int
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxPinsFileBytes+1)
	for sc.Scan() {
		line++
		text := StripComment(sc.Text())
		if text == "" {
			continue
		}
		p, err := ParsePattern(text)
		if err != nil {
			errs = append(errs, fmt.Errorf("pins file %q line %d: %w", path, line, err))
			continue
		}
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("read pins file %q after line %d: %w", path, line, err))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// StripComment removes a "#" comment that starts the line or follows whitespace, and trims.
func StripComment(line string) string {
	for i := 0; i < len(line); i++ {
		if line[i] == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t') {
			line = line[:i]
			break
		}
	}
	return strings.TrimSpace(line)
}
