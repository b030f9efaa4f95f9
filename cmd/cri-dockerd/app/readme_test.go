package app

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// readmeFlag is one flag as README.md's "Flags" tables document it.
type readmeFlag struct {
	shorthand string // "h" for "-h/--help"
	def       string // the default, as the flag set prints it ("" is written `""`)
	line      int
}

// readmeFlags parses the tables of the "## Flags" section of README.md. A row's first cell names one
// or more flags (`--a`, `--b`, or `-h/--help`); its second cell has one backquoted default per flag,
// in the same order (text outside backquotes is commentary).
func readmeFlags(t *testing.T, readme string) map[string]readmeFlag {
	t.Helper()
	const heading = "\n## Flags\n"
	start := strings.Index(readme, heading)
	assert.Assert(t, start >= 0, "README.md has no \"## Flags\" section")
	start += len(heading)
	section, _, _ := strings.Cut(readme[start:], "\n## ")
	firstLine := strings.Count(readme[:start], "\n") + 1 // README.md's line number of section's first line

	nameRE := regexp.MustCompile("^`(?:-([a-z])/)?--([a-z0-9-]+)`$")
	backquotedRE := regexp.MustCompile("`([^`]*)`")
	flags := map[string]readmeFlag{}
	for i, row := range strings.Split(section, "\n") {
		cells := strings.Split(row, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`-") {
			continue // not a flag row: prose, a header or a separator
		}
		line := firstLine + i
		names := strings.Split(strings.TrimSpace(cells[1]), ", ")
		defaults := backquotedRE.FindAllStringSubmatch(cells[2], -1)
		assert.Check(t, len(defaults) == len(names), "README.md:%d: want one backquoted default per flag in %q", line, cells[2])
		for j, name := range names {
			m := nameRE.FindStringSubmatch(name)
			if !assert.Check(t, m != nil, "README.md:%d: %q is not `--flag` or `-x/--flag`", line, name) {
				continue
			}
			_, dup := flags[m[2]]
			assert.Check(t, !dup, "README.md:%d: --%s listed twice", line, m[2])
			f := readmeFlag{shorthand: m[1], line: line}
			if j < len(defaults) {
				f.def = defaults[j][1]
				if f.def == `""` {
					f.def = ""
				}
			}
			flags[m[2]] = f
		}
	}
	return flags
}

// TestReadmeFlagTables keeps README.md's flag tables and the flag set in step: every registered,
// non-hidden flag is listed with the default the flag set prints, and nothing else is listed.
func TestReadmeFlagTables(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
	assert.NilError(t, err)
	documented := readmeFlags(t, string(readme))

	opts := DefaultOptions()
	registered := map[string]bool{}
	opts.flagSet().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		registered[f.Name] = true
		doc, ok := documented[f.Name]
		if !assert.Check(t, ok, "--%s is not in README.md's flag tables", f.Name) {
			return
		}
		assert.Check(t, is.Equal(doc.def, f.DefValue), "README.md:%d: default of --%s", doc.line, f.Name)
		assert.Check(t, is.Equal(doc.shorthand, f.Shorthand), "README.md:%d: shorthand of --%s", doc.line, f.Name)
	})
	for name, doc := range documented {
		assert.Check(t, registered[name], "README.md:%d: --%s is not a flag", doc.line, name)
	}
}
