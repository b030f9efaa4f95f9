package logs

import (
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"
)

// now is the time lines without a timestamp are stamped with in these tests.
var now = at(time.Hour)

// parse runs a lineParser over the pieces and returns the CRI text it emits for
// stream stdout.
func parse(maxLine int, pieces [][]byte, final bool) string {
	var out []byte
	p := newLineParser(&sync.Mutex{}, maxLine, func(ts time.Time, partial bool, content []byte) {
		out = appendCRILine(out, ts, streamStdout, partial, content)
	}, func() time.Time { return now }, nil)
	for _, b := range pieces {
		n, err := p.Write(b)
		if err != nil || n != len(b) {
			panic("short write")
		}
	}
	p.flush(final)
	return string(out)
}

func whole(in string) [][]byte { return [][]byte{[]byte(in)} }

func byteByByte(in string) [][]byte {
	var out [][]byte
	for i := range len(in) {
		out = append(out, []byte{in[i]})
	}
	return out
}

func randomPieces(in string, seed int64) [][]byte {
	r := rand.New(rand.NewSource(seed))
	var out [][]byte
	for len(in) > 0 {
		n := min(1+r.Intn(40), len(in))
		out = append(out, []byte(in[:n]))
		in = in[n:]
	}
	return out
}

func TestLineParser(t *testing.T) {
	t1, t2 := at(100*time.Millisecond), at(time.Second+5)
	e1, e2 := engineTime(t1), engineTime(t2)
	o1, o2, on := t1.Format(timeFormat), t2.Format(timeFormat), now.Format(timeFormat)
	big := strings.Repeat("a", engineChunkLen)
	tests := []struct {
		name    string
		maxLine int
		in      string
		final   bool
		want    string
	}{
		{
			name: "full lines",
			in:   e1 + " hello\n" + e2 + " world\n",
			want: o1 + " stdout F hello\n" + o2 + " stdout F world\n",
		},
		{
			name: "empty line and spaces kept",
			in:   e1 + " \n" + e2 + "  two  spaces \n",
			want: o1 + " stdout F \n" + o2 + " stdout F  two  spaces \n",
		},
		{
			name: "carriage return before newline dropped",
			in:   e1 + " tty line\r\n" + e2 + " a\rb\n",
			want: o1 + " stdout F tty line\n" + o2 + " stdout F a\rb\n",
		},
		{
			name:    "long line split into partial chunks",
			maxLine: 4,
			in:      e1 + " abcdefghij\n",
			want:    o1 + " stdout P abcd\n" + o1 + " stdout P efgh\n" + o1 + " stdout F ij\n",
		},
		{
			name:    "line of exactly the maximum stays full",
			maxLine: 4,
			in:      e1 + " abcd\n" + e2 + " efgh\n",
			want:    o1 + " stdout F abcd\n" + o2 + " stdout F efgh\n",
		},
		{
			name:    "one byte over the maximum",
			maxLine: 4,
			in:      e1 + " abcde\n",
			want:    o1 + " stdout P abcd\n" + o1 + " stdout F e\n",
		},
		{
			name:    "carriage return at the split point",
			maxLine: 4,
			in:      e1 + " abcd\r\n" + e2 + " abc\rd\n",
			want:    o1 + " stdout F abcd\n" + o2 + " stdout P abc\r\n" + o2 + " stdout F d\n",
		},
		{
			name:    "carriage returns after a full chunk",
			maxLine: 4,
			in:      e1 + " abcd\r\r\n" + e2 + " abcd\rx\n" + e2 + " abcd\r",
			final:   true,
			want: o1 + " stdout P abcd\n" + o1 + " stdout F \r\n" +
				o2 + " stdout P abcd\n" + o2 + " stdout F \rx\n" +
				o2 + " stdout P abcd\n" + o2 + " stdout P \r\n",
		},
		{
			name:  "no newline at the end of the stream",
			in:    e1 + " done\n" + e2 + " prompt> ",
			final: true,
			want:  o1 + " stdout F done\n" + o2 + " stdout P prompt> \n",
		},
		{
			name:  "stopped mid-message",
			in:    e1 + " done\n" + e2 + " half",
			final: false,
			want:  o1 + " stdout F done\n" + o2 + " stdout P half\n",
		},
		{
			name:  "stopped in a timestamp",
			in:    e1 + " done\n" + e2[:10],
			final: false,
			want:  o1 + " stdout F done\n",
		},
		{
			name: "line the engine cut into two messages",
			in:   e1 + " " + big + e2 + " tail\n",
			want: o1 + " stdout P " + big + "\n" + o2 + " stdout F tail\n",
		},
		{
			name: "message of exactly the engine's chunk length",
			in:   e1 + " " + big + "\n" + e2 + " next\n",
			want: o1 + " stdout F " + big + "\n" + o2 + " stdout F next\n",
		},
		{
			name: "one long message is not mistaken for a cut",
			in:   e1 + " " + big + "bcd\n",
			want: o1 + " stdout P " + big + "\n" + o1 + " stdout F bcd\n",
		},
		{
			name: "date-like content at the engine's chunk length",
			in:   e1 + " " + big + "2024-13-99T00 x\n",
			want: o1 + " stdout P " + big + "\n" + o1 + " stdout F 2024-13-99T00 x\n",
		},
		{
			name: "earlier timestamp at the engine's chunk length is content",
			in:   e2 + " " + big + e1 + " x\n",
			want: o2 + " stdout P " + big + "\n" + o2 + " stdout F " + e1 + " x\n",
		},
		{
			name:    "engine cut with a smaller maximum",
			maxLine: 5000,
			in:      e1 + " " + big + e2 + " tail\n",
			want: o1 + " stdout P " + big[:5000] + "\n" + o1 + " stdout P " + big[:5000] + "\n" +
				o1 + " stdout P " + big[:5000] + "\n" + o1 + " stdout P " + big[:1384] + "\n" +
				o2 + " stdout F tail\n",
		},
		{
			name:  "stream ends after the engine's chunk length",
			in:    e1 + " " + big,
			final: true,
			want:  o1 + " stdout P " + big + "\n",
		},
		{
			name: "line without a timestamp is stamped now",
			in:   "no timestamp here\n" + e1 + " ok\n",
			want: on + " stdout F no timestamp here\n" + o1 + " stdout F ok\n",
		},
		{
			name: "overlong prefix is content",
			in:   strings.Repeat("x", 50) + "\n",
			want: on + " stdout F " + strings.Repeat("x", 50) + "\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			maxLine := tc.maxLine
			if maxLine == 0 {
				maxLine = DefaultMaxLineSize
			}
			got := parse(maxLine, whole(tc.in), tc.final)
			assert.Equal(t, got, tc.want)
			parseCRIText(t, got)

			// Chunk boundaries do not matter.
			assert.Equal(t, parse(maxLine, byteByByte(tc.in), tc.final), tc.want, "byte by byte")
			for seed := range int64(5) {
				assert.Equal(t, parse(maxLine, randomPieces(tc.in, seed), tc.final), tc.want, "random pieces, seed %d", seed)
			}
		})
	}
}

func TestParseCRILine(t *testing.T) {
	ts := at(123)
	tests := []struct {
		line    string
		want    criLine
		wantErr bool
	}{
		{line: ts.Format(timeFormat) + " stdout F hello", want: criLine{ts: ts, stream: "stdout", content: []byte("hello")}},
		{line: ts.Format(time.RFC3339Nano) + " stderr P ", want: criLine{ts: ts, stream: "stderr", partial: true, content: []byte{}}},
		{line: ts.Format(timeFormat) + " stdout F:x a b", want: criLine{ts: ts, stream: "stdout", content: []byte("a b")}},
		{line: "", wantErr: true},
		{line: "garbage stdout F x", wantErr: true},
		{line: ts.Format(timeFormat) + " stdin F x", wantErr: true},
		{line: ts.Format(timeFormat) + " stdout X x", wantErr: true},
		{line: ts.Format(timeFormat) + " stdout F", wantErr: true},
		{line: `{"log":"x\n","stream":"stdout","time":"2024-05-01T10:00:00Z"}`, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.line, func(t *testing.T) {
			got, err := parseCRILine([]byte(tc.line))
			if tc.wantErr {
				assert.ErrorIs(t, err, errMalformed)
				return
			}
			assert.NilError(t, err)
			assert.Assert(t, got.ts.Equal(tc.want.ts))
			assert.Equal(t, got.stream, tc.want.stream)
			assert.Equal(t, got.partial, tc.want.partial)
			assert.Equal(t, string(got.content), string(tc.want.content))
		})
	}
}

func TestReadResumePoint(t *testing.T) {
	t1, t2 := at(time.Second+100), at(time.Second+200)
	l := func(ts time.Time, stream string, partial bool, content string) string {
		return string(appendCRILine(nil, ts, stream, partial, []byte(content)))
	}
	tests := []struct {
		name    string
		file    string
		want    resumePoint
		wantOK  bool
		wantEnd int
	}{
		{name: "empty", file: "", wantEnd: 0},
		{name: "only a fragment", file: "2024-05-01T10:00:0", wantEnd: 0},
		{
			name:   "full last line",
			file:   l(t1, "stdout", false, "a") + l(t2, "stderr", false, "b"),
			want:   resumePoint{ts: t2, stream: "stderr"},
			wantOK: true,
		},
		{
			name:   "partial chunks of the last line",
			file:   l(t1, "stdout", false, "a") + l(t2, "stdout", true, "abcd") + l(t2, "stdout", true, "efg"),
			want:   resumePoint{ts: t2, stream: "stdout", partial: true, written: 7},
			wantOK: true,
		},
		{
			name:   "partial chunks of another stream or time are not counted",
			file:   l(t1, "stdout", true, "xx") + l(t2, "stderr", true, "yy") + l(t2, "stdout", true, "abcd"),
			want:   resumePoint{ts: t2, stream: "stdout", partial: true, written: 4},
			wantOK: true,
		},
		{
			name:    "fragment after the last line",
			file:    l(t1, "stdout", false, "a") + "2024-05-01T10:00:01.000000200Z stdout F hal",
			want:    resumePoint{ts: t1, stream: "stdout"},
			wantOK:  true,
			wantEnd: len(l(t1, "stdout", false, "a")),
		},
		{
			name:   "not a CRI log",
			file:   `{"log":"x\n","stream":"stdout","time":"2024-05-01T10:00:00Z"}` + "\n",
			wantOK: false,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rp, end, ok, err := readResumePoint(strings.NewReader(tc.file), int64(len(tc.file)))
			assert.NilError(t, err)
			assert.Equal(t, ok, tc.wantOK)
			wantEnd := tc.wantEnd
			if wantEnd == 0 && strings.HasSuffix(tc.file, "\n") {
				wantEnd = len(tc.file)
			}
			assert.Equal(t, end, int64(wantEnd))
			if tc.wantOK {
				assert.Assert(t, rp.ts.Equal(tc.want.ts), "ts %s", rp.ts)
				assert.Equal(t, rp.stream, tc.want.stream)
				assert.Equal(t, rp.partial, tc.want.partial)
				assert.Equal(t, rp.written, tc.want.written)
			}
		})
	}
}

func TestReadResumePointBeyondWindow(t *testing.T) {
	// Partial chunks of one line spanning more than the first window read.
	ts := at(time.Second)
	chunk := strings.Repeat("z", 1000)
	var b strings.Builder
	b.WriteString(string(appendCRILine(nil, at(0), "stdout", false, []byte("first"))))
	n := 3 * tailWindowStart / len(chunk)
	for range n {
		b.Write(appendCRILine(nil, ts, "stdout", true, []byte(chunk)))
	}
	file := b.String()
	rp, end, ok, err := readResumePoint(strings.NewReader(file), int64(len(file)))
	assert.NilError(t, err)
	assert.Assert(t, ok)
	assert.Equal(t, end, int64(len(file)))
	assert.Equal(t, rp.written, n*len(chunk))
}

func TestResumeFilter(t *testing.T) {
	t1, t2, t3 := at(1), at(2), at(3)
	type chunk struct {
		ts      time.Time
		stream  string
		partial bool
		content string
	}
	tests := []struct {
		name string
		rp   resumePoint
		in   []chunk
		want []chunk
	}{
		{
			name: "nothing written",
			in:   []chunk{{t1, "stdout", false, "a"}},
			want: []chunk{{t1, "stdout", false, "a"}},
		},
		{
			name: "complete line at the resume time is dropped",
			rp:   resumePoint{ts: t2, stream: "stdout"},
			in:   []chunk{{t1, "stdout", false, "a"}, {t2, "stdout", false, "b"}, {t2, "stderr", false, "c"}, {t3, "stderr", false, "d"}},
			want: []chunk{{t3, "stderr", false, "d"}},
		},
		{
			name: "partly written line continues",
			rp:   resumePoint{ts: t2, stream: "stdout", partial: true, written: 6},
			in:   []chunk{{t2, "stdout", true, "abcd"}, {t2, "stdout", true, "efgh"}, {t2, "stdout", false, "ij"}, {t3, "stdout", false, "k"}},
			want: []chunk{{t2, "stdout", true, "gh"}, {t2, "stdout", false, "ij"}, {t3, "stdout", false, "k"}},
		},
		{
			name: "all content written: an empty full chunk ends the line",
			rp:   resumePoint{ts: t2, stream: "stdout", partial: true, written: 4},
			in:   []chunk{{t2, "stdout", false, "abcd"}},
			want: []chunk{{t2, "stdout", false, ""}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rp := tc.rp
			var got, want string
			for _, c := range tc.in {
				if out, ok := rp.filter(c.ts, c.stream, c.partial, []byte(c.content)); ok {
					got += string(appendCRILine(nil, c.ts, c.stream, c.partial, out))
				}
			}
			for _, c := range tc.want {
				want += string(appendCRILine(nil, c.ts, c.stream, c.partial, []byte(c.content)))
			}
			assert.Equal(t, got, want)
		})
	}
}
