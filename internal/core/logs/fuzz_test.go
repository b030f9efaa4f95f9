package logs

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"
)

// fuzzNow stamps the messages without a timestamp in the fuzz tests.
var fuzzNow = time.Date(2024, 5, 1, 11, 0, 0, 0, time.UTC)

type fuzzChunk struct {
	ts      time.Time
	partial bool
	content string
}

// fuzzCopy runs one stream's parser over pieces, as the copier does at the end of
// the engine's log (flush with final set), and returns the chunks it emits and the
// CRI file content they make.
func fuzzCopy(maxLine int, stream string, pieces [][]byte) ([]fuzzChunk, string) {
	var (
		chunks []fuzzChunk
		file   []byte
	)
	p := newLineParser(&sync.Mutex{}, maxLine, func(ts time.Time, partial bool, content []byte) {
		chunks = append(chunks, fuzzChunk{ts: ts, partial: partial, content: string(content)})
		file = appendCRILine(file, ts, stream, partial, content)
	}, func() time.Time { return fuzzNow }, nil)
	for _, b := range pieces {
		if n, err := p.Write(b); err != nil || n != len(b) {
			panic("short write")
		}
	}
	p.flush(true)
	return chunks, string(file)
}

// fuzzPieces cuts in into pieces whose lengths are taken from cuts (cycled).
func fuzzPieces(in, cuts []byte) [][]byte {
	if len(cuts) == 0 {
		cuts = []byte{0}
	}
	var out [][]byte
	for i := 0; len(in) > 0; i++ {
		n := min(1+int(cuts[i%len(cuts)]), len(in))
		out = append(out, in[:n])
		in = in[n:]
	}
	return out
}

// FuzzLineParser checks that the CRI log file written from an engine stream does not
// depend on how the stream is cut into writes, that every chunk fits maxLine and holds
// no newline, that each newline of the input ends exactly one F line, and that every
// line written parses back to what was written.
func FuzzLineParser(f *testing.F) {
	t1 := "2024-05-01T10:00:00.100000000Z"
	t2 := "2024-05-01T10:00:01.000000005Z"
	for _, in := range []string{
		t1 + " hello\n" + t2 + " world\n",
		t1 + " a long line cut into chunks\n",
		t1 + " crlf\r\n" + t2 + " bare cr\r" + t2 + " \n",
		t1 + " no newline at the end",
		"no timestamp\n" + t1 + " after a bad line\n",
		"2024-05-01T12:00:00+02:00 offset\n2024-05-01T10:00:00.5Z short fraction\n",
		t1 + " \n\n" + t2 + "  two spaces\n",
		t1 + " " + strings.Repeat("x", 300) + "\n",
		strings.Repeat("9", 50) + " long prefix\n",
	} {
		f.Add([]byte(in), []byte{0, 3, 17}, uint8(7), false)
		f.Add([]byte(in), []byte{255}, uint8(0), true)
	}
	f.Fuzz(func(t *testing.T, in, cuts []byte, maxLine uint8, stderr bool) {
		ml := 1 + int(maxLine)
		stream := streamStdout
		if stderr {
			stream = streamStderr
		}
		chunks, file := fuzzCopy(ml, stream, [][]byte{in})
		_, cut := fuzzCopy(ml, stream, fuzzPieces(in, cuts))
		assert.Equal(t, cut, file, "the file depends on how the input was cut")
		if len(in) <= 4096 {
			_, bytewise := fuzzCopy(ml, stream, fuzzPieces(in, nil))
			assert.Equal(t, bytewise, file, "the file differs when written byte by byte")
		}

		full := 0
		for _, c := range chunks {
			assert.Assert(t, len(c.content) <= ml, "chunk of %d bytes, max %d", len(c.content), ml)
			assert.Assert(t, !strings.Contains(c.content, "\n"), "chunk %q holds a newline", c.content)
			if !c.partial {
				full++
			}
		}
		assert.Equal(t, full, bytes.Count(in, []byte{'\n'}), "F lines vs newlines of the input")
		if n := len(chunks); n > 0 && len(in) > 0 && in[len(in)-1] == '\n' {
			assert.Assert(t, !chunks[n-1].partial, "input ends with a newline, the file with a P line")
		}

		lines := strings.SplitAfter(file, "\n")
		assert.Equal(t, lines[len(lines)-1], "", "file does not end with a newline")
		lines = lines[:len(lines)-1]
		assert.Equal(t, len(lines), len(chunks))
		for i, line := range lines {
			l, err := parseCRILine([]byte(strings.TrimSuffix(line, "\n")))
			assert.NilError(t, err, "line %d %q", i, line)
			c := chunks[i]
			assert.Assert(t, l.ts.Equal(c.ts), "line %d: time %v, written %v", i, l.ts, c.ts)
			assert.Equal(t, l.stream, stream)
			assert.Equal(t, l.partial, c.partial)
			assert.Equal(t, string(l.content), c.content)
		}
	})
}

// FuzzParseCRILine checks that the CRI line parser and the resume point reader never
// panic on arbitrary bytes, that a line that parses (with a time of a year 0000-9999
// UTC) is written back by appendCRILine as a line that parses to the same chunk, and
// that the resume point ends on a line.
func FuzzParseCRILine(f *testing.F) {
	for _, s := range []string{
		"2024-05-01T10:00:00.100000000Z stdout F hello",
		"2024-05-01T10:00:00.1Z stderr P part",
		"2024-05-01T10:00:00Z stdout F:x tags",
		"2024-05-01T12:00:00+02:00 stdout F ",
		"2024-05-01T10:00:00Z stdin F x",
		"2024-05-01T10:00:00Z stdout FF x",
		"garbage",
		"2024-05-01T10:00:00Z stdout P a\n2024-05-01T10:00:00Z stdout P b\n2024-05-01T10:00:00Z stdout F c\n",
		"2024-05-01T10:00:00Z stdout P a\n2024-05-01T10:00:00Z stdout P b\npartial last li",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rp, end, ok, err := readResumePoint(bytes.NewReader(b), int64(len(b)))
		assert.NilError(t, err)
		assert.Assert(t, end >= 0 && end <= int64(len(b)), "end %d of %d bytes", end, len(b))
		if end > 0 && end < int64(len(b)) {
			assert.Equal(t, b[end-1], byte('\n'), "resume point %d not after a newline", end)
		}
		if ok {
			assert.Assert(t, rp.stream == streamStdout || rp.stream == streamStderr)
			assert.Assert(t, rp.partial || rp.written == 0)
		}

		l, err := parseCRILine(b)
		if err != nil {
			assert.ErrorIs(t, err, errMalformed)
			return
		}
		if bytes.IndexByte(l.content, '\n') >= 0 {
			return // not a line
		}
		if y := l.ts.UTC().Year(); y < 0 || y > 9999 {
			// Like kubelet's, the parser takes any RFC 3339 time, offsets too, but
			// only times of years 0000-9999 UTC can be written back.
			return
		}
		out := appendCRILine(nil, l.ts, l.stream, l.partial, l.content)
		l2, err := parseCRILine(bytes.TrimSuffix(out, []byte{'\n'}))
		assert.NilError(t, err, "%q parsed, but its rewrite %q does not", b, out)
		assert.Assert(t, l2.ts.Equal(l.ts), "time %v, written %v", l2.ts, l.ts)
		assert.Equal(t, l2.stream, l.stream)
		assert.Equal(t, l2.partial, l.partial)
		assert.DeepEqual(t, l2.content, l.content)
	})
}
