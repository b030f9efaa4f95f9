package logs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
)

// resumePoint is where copying continues: the last chunk written to the file, and for
// a line cut off after partial chunks, how many of its content bytes were written.
// The engine is asked for messages since ts (inclusive); messages before ts, and at ts
// when the line there is complete, are already in the file.
type resumePoint struct {
	// ts is the timestamp of the last chunk written (zero: nothing written).
	ts time.Time
	// stream is the stream of the last chunk written.
	stream string
	// partial is set when the last chunk written was a P chunk.
	partial bool
	// written counts the content bytes of the message at ts already written (partial only).
	written int
}

// record notes that a chunk was written.
func (r *resumePoint) record(ts time.Time, stream string, partial bool, n int) {
	if partial && r.partial && r.stream == stream && r.ts.Equal(ts) {
		r.written += n
		return
	}
	*r = resumePoint{ts: ts, stream: stream, partial: partial}
	if partial {
		r.written = n
	}
}

// filter decides whether a chunk the engine sent is new, and trims the content bytes
// of a partly written message. It returns the content to write and whether to write.
func (r *resumePoint) filter(ts time.Time, stream string, partial bool, content []byte) ([]byte, bool) {
	if r.ts.IsZero() || ts.After(r.ts) {
		return content, true
	}
	if ts.Before(r.ts) || !r.partial || stream != r.stream {
		return nil, false
	}
	n := min(r.written, len(content))
	r.written -= n
	content = content[n:]
	if len(content) == 0 && partial {
		return nil, false
	}
	// A full chunk is kept even when empty: it ends the partial line in the file.
	return content, true
}

const (
	tailWindowStart = 64 << 10
	tailWindowMax   = 8 << 20
)

// readResumePoint finds the resume point at the end of a CRI log of size bytes. end is
// the length of the file's complete lines: anything after it is a fragment of a line
// that was being written when the shim stopped. ok is false when the file has no
// complete, parseable line to resume from.
func readResumePoint(r io.ReaderAt, size int64) (rp resumePoint, end int64, ok bool, err error) {
	window := int64(tailWindowStart)
	for {
		window = min(window, size)
		buf := make([]byte, window)
		if _, err := r.ReadAt(buf, size-window); err != nil && !errors.Is(err, io.EOF) {
			return resumePoint{}, size, false, err
		}
		whole := window == size
		lastNL := bytes.LastIndexByte(buf, '\n')
		if lastNL < 0 {
			if whole {
				return resumePoint{}, 0, false, nil
			}
			if window >= tailWindowMax {
				// One huge fragment: not a file we wrote; leave it alone.
				return resumePoint{}, size, false, nil
			}
			window *= 2
			continue
		}
		end = size - window + int64(lastNL) + 1
		rp, ok, more := scanBack(buf[:lastNL], whole)
		if more && window < tailWindowMax {
			window *= 2
			continue
		}
		return rp, end, ok, nil
	}
}

// scanBack parses lines backwards from the end of buf (which holds complete lines
// without the last newline; its first line is cut unless whole). more is set when
// the lines needed reach beyond buf.
func scanBack(buf []byte, whole bool) (rp resumePoint, ok, more bool) {
	pos := len(buf)
	for {
		startNL := bytes.LastIndexByte(buf[:pos], '\n')
		if startNL < 0 && !whole {
			return rp, ok, true
		}
		l, err := parseCRILine(buf[startNL+1 : pos])
		if err != nil {
			return rp, ok, false
		}
		if !ok {
			ok = true
			rp.record(l.ts, l.stream, l.partial, len(l.content))
			if !l.partial {
				return rp, ok, false
			}
		} else {
			if !l.partial || l.stream != rp.stream || !l.ts.Equal(rp.ts) {
				return rp, ok, false
			}
			rp.written += len(l.content)
		}
		if startNL < 0 {
			return rp, ok, false
		}
		pos = startNL
	}
}

// rotatedSibling returns the most recent file kubelet's log rotation renamed path to
// ("<path>.<timestamp>"; compressed ".gz" and in-progress ".tmp" files are skipped),
// or "" when there is none.
func rotatedSibling(path string) string {
	dir, base := filepath.Split(path)
	entries, err := os.ReadDir(filepath.Clean(dir))
	if err != nil {
		return ""
	}
	newest := ""
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(name, base+".") ||
			strings.HasSuffix(name, ".gz") || strings.HasSuffix(name, ".tmp") {
			continue
		}
		if name > newest {
			newest = name
		}
	}
	if newest == "" {
		return ""
	}
	return filepath.Join(dir, newest)
}

// resumeFrom reads the resume point of the CRI log f (the file lf), truncating a
// trailing fragment of a line, and falls back to the latest rotated file when f holds
// no line. A file whose last line is not in the CRI format is copied into from the start.
func (o opener) resumeFrom(f *os.File, lf LogFile, log logrus.FieldLogger) (resumePoint, error) {
	path := lf.Path()
	fi, err := f.Stat()
	if err != nil {
		return resumePoint{}, err
	}
	rp, end, ok, err := readResumePoint(f, fi.Size())
	if err != nil {
		return resumePoint{}, fmt.Errorf("read end of %s: %w", path, err)
	}
	if end < fi.Size() {
		log.WithFields(logrus.Fields{"path": path, "bytes": fi.Size() - end}).Debug("dropping the incomplete last line of the log file")
		if err := f.Truncate(end); err != nil {
			return resumePoint{}, fmt.Errorf("drop incomplete last line of %s: %w", path, err)
		}
	}
	if ok {
		return rp, nil
	}
	if end > 0 {
		log.WithField("path", path).Warn("last line of the log file is not in the CRI log format; copying the whole engine log after it")
		return resumePoint{}, nil
	}
	sib := rotatedSibling(path)
	if sib == "" {
		return resumePoint{}, nil
	}
	sf, err := o.openRotated(lf, filepath.Base(sib))
	if err != nil {
		log.WithError(err).WithField("path", sib).Debug("cannot read a rotated log file")
		return resumePoint{}, nil
	}
	defer sf.Close()
	sfi, err := sf.Stat()
	if err != nil {
		return resumePoint{}, nil
	}
	rp, _, _, err = readResumePoint(sf, sfi.Size())
	if err != nil {
		log.WithError(err).WithField("path", sib).Debug("cannot read a rotated log file")
		return resumePoint{}, nil
	}
	return rp, nil
}
