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

// flagsDoc is the operator documentation of the flags, relative to this package: its "## Flags"
// section holds one table row per flag.
const flagsDoc = "../../docs/flags.md"

// flagsDocName names flagsDoc in messages, as the repository root sees it.
const flagsDocName = "docs/flags.md"

// readmeFlag is one flag as the "Flags" tables of docs/flags.md document it.
type readmeFlag struct {
	shorthand string // "h" for "-h/--help"
	def       string // the default, as the flag set prints it ("" is written `""`)
	line      int
}

// readmeFlags parses the tables of the "## Flags" section of docs/flags.md (its "###" subsections
// included). A row's first cell names one or more flags (`--a`, `--b`, or `-h/--help`); its second
// cell has one backquoted default per flag, in the same order (text outside backquotes is commentary).
func readmeFlags(t *testing.T, doc string) map[string]readmeFlag {
	t.Helper()
	const heading = "\n## Flags\n"
	start := strings.Index(doc, heading)
	assert.Assert(t, start >= 0, "%s has no \"## Flags\" section", flagsDocName)
	start += len(heading)
	section, _, _ := strings.Cut(doc[start:], "\n## ")
	firstLine := strings.Count(doc[:start], "\n") + 1 // the file's line number of section's first line

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
		assert.Check(t, len(defaults) == len(names), "%s:%d: want one backquoted default per flag in %q", flagsDocName, line, cells[2])
		for j, name := range names {
			m := nameRE.FindStringSubmatch(name)
			if !assert.Check(t, m != nil, "%s:%d: %q is not `--flag` or `-x/--flag`", flagsDocName, line, name) {
				continue
			}
			_, dup := flags[m[2]]
			assert.Check(t, !dup, "%s:%d: --%s listed twice", flagsDocName, line, m[2])
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

// TestReadmeFlagTables keeps the flag tables of docs/flags.md (linked from README.md) and the flag
// set in step: every registered, non-hidden flag is listed with the default the flag set prints,
// and nothing else is listed.
func TestReadmeFlagTables(t *testing.T) {
	doc, err := os.ReadFile(flagsDoc)
	assert.NilError(t, err)
	documented := readmeFlags(t, string(doc))

	opts := DefaultOptions()
	registered := map[string]bool{}
	opts.flagSet().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		registered[f.Name] = true
		doc, ok := documented[f.Name]
		if !assert.Check(t, ok, "--%s is not in %s's flag tables", f.Name, flagsDocName) {
			return
		}
		assert.Check(t, is.Equal(doc.def, f.DefValue), "%s:%d: default of --%s", flagsDocName, doc.line, f.Name)
		assert.Check(t, is.Equal(doc.shorthand, f.Shorthand), "%s:%d: shorthand of --%s", flagsDocName, doc.line, f.Name)
	})
	for name, doc := range documented {
		assert.Check(t, registered[name], "%s:%d: --%s is not a flag", flagsDocName, doc.line, name)
	}
}
