package pinning

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// A line longer than bufio.Scanner's default token (64 KiB) is one bad line: the lines
// after it still pin (they were dropped, and the list only logged: fail-open).
func TestPreloadListLongLineKeepsTheLinesAfterIt(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "images.txt"), "app:1\n"+strings.Repeat("x", 100<<10)+"\ndb:2\n")
	d := newTestDir(t, dir, t.TempDir(), newPreloadEngine())
	d.settleAndLoad()
	assert.DeepEqual(t, d.preloadPins(t, "app:1", "db:2"), []string{"images.txt: app:1", "images.txt: db:2"})
	assert.Check(t, is.Contains(d.view(t, "images.txt").Failed, "line 2: invalid image reference"))
}

// A list too large is refused from its size, before anything is read: a misnamed
// multi-GB file must not be read into memory (a sparse file here: 64 MiB).
func TestPreloadListTooLargeIsNotRead(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "big.txt"))
	assert.NilError(t, err)
	assert.NilError(t, f.Truncate(64<<20))
	assert.NilError(t, f.Close())
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	d := newTestDir(t, dir, t.TempDir(), newPreloadEngine())
	d.settleAndLoad()
	runtime.ReadMemStats(&after)
	assert.Check(t, is.Contains(d.view(t, "big.txt").Failed, "larger than"))
	allocated := after.TotalAlloc - before.TotalAlloc
	assert.Check(t, allocated < 16<<20, "reading a refused list allocated %d bytes", allocated)
}

// A list with many references, each several times: deduplication is linear (it was
// quadratic: 80k references took seconds).
func TestParseListDeduplicates(t *testing.T) {
	var b strings.Builder
	for i := range 30000 {
		b.WriteString("registry.local/app:" + string(rune('a'+i%26)) + "\n")
	}
	refs, err := parseList([]byte(b.String()))
	assert.NilError(t, err)
	assert.Equal(t, len(refs), 26)
}

func BenchmarkParseList(b *testing.B) {
	var sb strings.Builder
	for i := range 40000 {
		sb.WriteString("registry.local/app:v" + strings.Repeat("1", 1+i%5) + "-" + strconv.Itoa(i) + "\n")
	}
	list := []byte(sb.String())
	for b.Loop() {
		if _, err := parseList(list); err != nil {
			b.Fatal(err)
		}
	}
}
