package logs

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Stream names and tags of the CRI log format.
const (
	streamStdout = "stdout"
	streamStderr = "stderr"
	tagPartial   = 'P'
	tagFull      = 'F'
)

// timeFormat is RFC 3339 with all nine fractional digits, so that timestamps in a
// file have one width and sort as text. kubelet parses any RFC 3339 fraction.
const timeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// maxPrefixLen bounds the engine's timestamp prefix; longer prefixes are malformed.
const maxPrefixLen = 40

// engineChunkLen is the length at which the engine's json-file and local log drivers
// cut a line that has no newline yet into a partial message. Such a message reaches us
// without a newline and is followed directly by the next message's timestamp prefix.
const engineChunkLen = 16 * 1024

// appendCRILine appends one line in the CRI log format to dst. content must not
// contain a newline.
func appendCRILine(dst []byte, ts time.Time, stream string, partial bool, content []byte) []byte {
	dst = ts.UTC().AppendFormat(dst, timeFormat)
	tag := byte(tagFull)
	if partial {
		tag = tagPartial
	}
	dst = append(dst, ' ')
	dst = append(dst, stream...)
	dst = append(dst, ' ', tag, ' ')
	dst = append(dst, content...)
	return append(dst, '\n')
}

// criLine is one parsed line of a CRI log file.
type criLine struct {
	ts      time.Time
	stream  string
	partial bool
	content []byte
}

var errMalformed = errors.New("malformed CRI log line")

// parseCRILine parses one line of a CRI log file (without its newline).
func parseCRILine(line []byte) (criLine, error) {
	var l criLine
	tsText, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return l, fmt.Errorf("%w: no timestamp", errMalformed)
	}
	ts, err := time.Parse(time.RFC3339Nano, string(tsText))
	if err != nil {
		return l, fmt.Errorf("%w: %w", errMalformed, err)
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok || (string(stream) != streamStdout && string(stream) != streamStderr) {
		return l, fmt.Errorf("%w: bad stream", errMalformed)
	}
	tags, content, ok := bytes.Cut(rest, []byte{' '})
	if !ok || len(tags) == 0 {
		return l, fmt.Errorf("%w: no tag", errMalformed)
	}
	first, _, _ := bytes.Cut(tags, []byte{':'})
	switch {
	case len(first) == 1 && first[0] == tagPartial:
		l.partial = true
	case len(first) == 1 && first[0] == tagFull:
	default:
		return l, fmt.Errorf("%w: bad tag %q", errMalformed, tags)
	}
	l.ts, l.stream, l.content = ts, string(stream), content
	return l, nil
}

// emitFunc receives one CRI chunk; content is only valid during the call.
type emitFunc func(ts time.Time, partial bool, content []byte)

type parserState int

const (
	// stateTS reads the engine's "<timestamp> " prefix of a message.
	stateTS parserState = iota
	// stateContent reads a message's content up to its newline.
	stateContent
	// statePeek follows engineChunkLen content bytes without a newline and decides
	// whether the next bytes start a new message (the engine cut the line) or
	// continue this one.
	statePeek
)

// lineParser is the io.Writer one engine stream is copied into. It turns the engine's
// "<timestamp> <content>\n" messages, cut at arbitrary Write boundaries, into CRI
// chunks: full lines (F), and partial chunks (P) for lines longer than maxLine, for
// lines the engine cut into several messages, and for a line without a newline at the
// end of the stream.
type lineParser struct {
	// mu is shared by the parsers of one container's streams and its file.
	mu      *sync.Mutex
	maxLine int
	emit    emitFunc
	now     func() time.Time
	// malformed is called when a message has no parseable timestamp prefix.
	malformed func(prefix []byte)
	// peer is the parser of the container's other stream, if any.
	peer *lineParser

	state parserState
	// prefix holds the timestamp bytes read so far (stateTS, statePeek).
	prefix []byte
	// ts is the timestamp of the message being read.
	ts time.Time
	// content is the current chunk's content not yet emitted: at most maxLine bytes,
	// plus a carriage return held back in case a newline follows.
	content []byte
	// msgLen counts the content bytes of the message being read.
	msgLen int
	// peeked is set once this message was found to continue past engineChunkLen.
	peeked bool
}

// newLineParser returns a parser emitting chunks of at most maxLine content bytes. mu
// is held while it parses and emits.
func newLineParser(mu *sync.Mutex, maxLine int, emit emitFunc, now func() time.Time, malformed func([]byte)) *lineParser {
	return &lineParser{mu: mu, maxLine: maxLine, emit: emit, now: now, malformed: malformed}
}

// pair links the parsers of a container's two streams. The engine sends one message
// after the other, so when one stream starts a message, a message of the other
// stream that ended without a newline is complete: its content is emitted as a
// partial chunk then, keeping the file in the engine's order.
func pair(a, b *lineParser) {
	a.peer, b.peer = b, a
}

// Write implements io.Writer; it never fails.
func (p *lineParser) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(b)
	p.feed(b)
	return n, nil
}

func (p *lineParser) feed(b []byte) {
	for len(b) > 0 {
		switch p.state {
		case stateTS:
			b = p.feedPrefix(b)
		case statePeek:
			b = p.feedPeek(b)
		default:
			b = p.feedContent(b)
		}
	}
}

func (p *lineParser) feedPrefix(b []byte) []byte {
	i := bytes.IndexAny(b, " \n")
	if i < 0 {
		if len(p.prefix)+len(b) <= maxPrefixLen {
			p.prefix = append(p.prefix, b...)
			return nil
		}
		p.prefix = append(p.prefix, b...)
		p.badPrefix()
		return nil
	}
	p.prefix = append(p.prefix, b[:i]...)
	if b[i] == ' ' && len(p.prefix) <= maxPrefixLen {
		if ts, ok := parseEngineTime(p.prefix); ok {
			p.prefix = p.prefix[:0]
			p.startMessage(ts)
			return b[i+1:]
		}
	}
	// The separator (or newline) is content of the malformed message.
	p.badPrefix()
	return b[i:]
}

// badPrefix starts a message stamped now whose content begins with the bytes that
// were read as its timestamp.
func (p *lineParser) badPrefix() {
	bad := append([]byte(nil), p.prefix...)
	p.prefix = p.prefix[:0]
	if p.malformed != nil {
		p.malformed(bad)
	}
	p.startMessage(p.now())
	p.feed(bad)
}

func (p *lineParser) startMessage(ts time.Time) {
	if p.peer != nil {
		p.peer.emitPending()
	}
	p.ts = ts
	p.msgLen = 0
	p.peeked = false
	p.state = stateContent
}

func (p *lineParser) feedContent(b []byte) []byte {
	for len(b) > 0 {
		if p.msgLen >= engineChunkLen && !p.peeked {
			p.state = statePeek
			return b
		}
		seg := b
		if !p.peeked && len(seg) > engineChunkLen-p.msgLen {
			seg = seg[:engineChunkLen-p.msgLen]
		}
		if i := bytes.IndexByte(seg, '\n'); i >= 0 {
			p.appendContent(seg[:i])
			p.endLine()
			return b[i+1:]
		}
		p.appendContent(seg)
		b = b[len(seg):]
	}
	return b
}

// appendContent adds content to the current chunk. A full chunk is emitted as P only
// when more content follows it, so a line of exactly maxLine bytes stays one F line;
// a carriage return after a full chunk is held back in case a newline follows.
func (p *lineParser) appendContent(seg []byte) {
	for len(seg) > 0 {
		if len(p.content) >= p.maxLine {
			if len(p.content) == p.maxLine && seg[0] == '\r' {
				p.content = append(p.content, '\r')
				p.msgLen++
				seg = seg[1:]
				continue
			}
			p.emit(p.ts, true, p.content[:p.maxLine])
			p.content = append(p.content[:0], p.content[p.maxLine:]...)
		}
		k := min(p.maxLine-len(p.content), len(seg))
		p.content = append(p.content, seg[:k]...)
		p.msgLen += k
		seg = seg[k:]
	}
}

// emitPending emits the content of an unfinished message as a partial chunk; the
// message may still continue.
func (p *lineParser) emitPending() {
	if p.state == stateContent || p.state == statePeek {
		p.emitPartial()
	}
}

// emitPartial emits the current chunk, if any, as partial (as two when a carriage
// return was held back after a full chunk).
func (p *lineParser) emitPartial() {
	c := p.content
	if len(c) == 0 {
		return
	}
	for len(c) > p.maxLine {
		p.emit(p.ts, true, c[:p.maxLine])
		c = c[p.maxLine:]
	}
	p.emit(p.ts, true, c)
	p.content = p.content[:0]
}

// endLine emits the current chunk as the end of a line. A carriage return before the
// newline is dropped, as containerd does, so TTY output reads like other output.
func (p *lineParser) endLine() {
	c := p.content
	if n := len(c); n > 0 && c[n-1] == '\r' {
		c = c[:n-1]
	}
	p.emit(p.ts, false, c)
	p.content = p.content[:0]
	p.state = stateTS
}

func (p *lineParser) feedPeek(b []byte) []byte {
	for i, c := range b {
		if c == ' ' {
			p.prefix = append(p.prefix, b[:i]...)
			ts, ok := parseEngineTime(p.prefix)
			if ok && !ts.Before(p.ts) {
				// The engine cut the line here: what we have is a partial chunk.
				p.prefix = p.prefix[:0]
				p.emitPartial()
				p.startMessage(ts)
				return b[i+1:]
			}
			p.peekFailed()
			return b[i:]
		}
		if !isTimestampByte(c) || len(p.prefix)+i >= maxPrefixLen {
			p.prefix = append(p.prefix, b[:i]...)
			p.peekFailed()
			return b[i:]
		}
	}
	p.prefix = append(p.prefix, b...)
	return nil
}

// peekFailed continues the message with the bytes that looked like a timestamp.
func (p *lineParser) peekFailed() {
	rest := append([]byte(nil), p.prefix...)
	p.prefix = p.prefix[:0]
	p.peeked = true
	p.state = stateContent
	p.feed(rest)
}

// parseEngineTime parses the timestamp prefix of an engine message. A time that is
// not in the years 0000-9999 once in UTC (an offset can move "0000-01-01T00:00:00+01:00"
// into year -1) is refused: its CRI line could not be parsed back.
func parseEngineTime(b []byte) (time.Time, bool) {
	ts, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil {
		return time.Time{}, false
	}
	if y := ts.UTC().Year(); y < 0 || y > 9999 {
		return time.Time{}, false
	}
	return ts, true
}

func isTimestampByte(c byte) bool {
	return (c >= '0' && c <= '9') || c == '-' || c == ':' || c == '.' || c == 'T' || c == 'Z' || c == '+'
}

// flush ends the stream. Content of a line without a newline is emitted as a partial
// chunk, as containerd does at the end of a stream. With final unset (the copier was
// stopped, the stream may have been cut anywhere) bytes that may be the start of the
// next message's timestamp are dropped; with final set they are content.
func (p *lineParser) flush(final bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.state {
	case statePeek:
		if final {
			p.appendContent(p.prefix)
		}
		p.emitPartial()
	case stateContent:
		p.emitPartial()
	}
	p.resetLocked()
}

// flushPair ends both streams of a container, the older pending message first.
func flushPair(a, b *lineParser, final bool) {
	a.mu.Lock()
	first, second := a, b
	if b.state != stateTS && (a.state == stateTS || b.ts.Before(a.ts)) {
		first, second = b, a
	}
	a.mu.Unlock()
	first.flush(final)
	second.flush(final)
}

// reset drops everything buffered (the engine will send it again).
func (p *lineParser) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resetLocked()
}

func (p *lineParser) resetLocked() {
	p.state = stateTS
	p.prefix = p.prefix[:0]
	p.content = p.content[:0]
	p.ts = time.Time{}
	p.msgLen = 0
	p.peeked = false
}
