package pinner

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dockpin/cri-dockerd/pinning/pin"
)

// DefaultSandboxImage is the pod infra image pinned when the configuration names none other.
const DefaultSandboxImage = "registry.k8s.io/pause:3.10"

// Config is the pinning configuration, filled from command-line flags.
type Config struct {
	// SandboxImage is the pod infra image (--pod-infra-container-image). It is always
	// pinned, matched as an exact reference ("pause" means "pause:latest"). "" pins none.
	SandboxImage string
	// ConfigLabels honours io.cri-containerd.pinned=pinned in image config labels.
	ConfigLabels bool
	// Patterns are the --pinned-images patterns: "repo:tag", "repo@digest", "sha256:<hex>",
	// "repo", "prefix*" or "*keyword*".
	Patterns []string
	// LabelSelectors are the --pinned-image-labels selectors, matched on image config
	// labels: "key" (present, any value) or "key=value" (exact value).
	LabelSelectors []string
	// PinsFile is the --pinned-images-file path, one pattern per line, re-read by
	// Reload; "" means none.
	PinsFile string
	// PinsDir is the --pinned-images-dir directory: each of its pins files (see
	// isPinsFileName) is read as PinsFile is, after it; "" means none, and a directory
	// that does not exist pins nothing.
	PinsDir string
	// MaxStaleness is how long the last good snapshot of a failing Source keeps
	// being used; past it Evaluate fails (ListImages answers Unavailable) until the
	// source answers again. 0 means no limit.
	MaxStaleness time.Duration
	// StateDir is where pin state that must outlive the process is kept: the last
	// good snapshot of each Source, the last good pins file. "" keeps none.
	StateDir string
	// SnapshotTTL is how old a Source snapshot Check may reuse; Evaluate always takes
	// a fresh one.
	SnapshotTTL time.Duration
	// WarnInterval is the minimum interval between two warnings about pin-like but
	// ineffective labels on the same image; 0 warns every time.
	WarnInterval time.Duration
	// Preloaded are the images loaded from the preload directory, by file; each
	// reference is pinned exactly. A host calling New sets it once (the pins of
	// archives gone since an earlier start are not here, so they are dropped); Start
	// leaves it empty and keeps the pins of --preload-images-dir current itself.
	Preloaded []Preloaded
}

// Preloaded is what one file of the preload directory (an image archive or a .txt
// list of references) pins, and where it stands.
type Preloaded struct {
	// Tarball is the file's name in the preload directory (an archive or a list).
	Tarball string `json:"tarball"`
	// Refs are the references (or IDs, for untagged images) the engine loaded from it,
	// or, when it failed to load, the ones it holds (see Origin); for a list, the
	// references it lists.
	Refs []string `json:"refs"`
	// Failed says why the file did not load (or, for a list, why the last pull of one
	// of its images failed); "" when it did.
	Failed string `json:"failed,omitempty"`
	// Origin says where Refs come from: OriginLoaded, OriginManifest (read from the
	// archive, which the engine could not load or has not loaded yet), OriginSaved
	// (the state saved at its last good load: the archive could not even be read, or
	// is not processed yet at this start) or OriginListed (a .txt list).
	Origin string `json:"origin,omitempty"`
	// Kind is PreloadArchive or PreloadList; "" for an archive (Config.Preloaded).
	Kind string `json:"kind,omitempty"`
	// State is PreloadPending, PreloadLoaded or PreloadFailed; "" in Config.Preloaded.
	State string `json:"state,omitempty"`
	// Digest is the sha256 of the archive the engine loaded ("sha256:<hex>").
	Digest string `json:"digest,omitempty"`
	// Skipped is true when the archive was not loaded again at this start: its
	// content digest is the one recorded at its last load and the engine still has
	// every image it loaded then.
	Skipped bool `json:"skipped,omitempty"`
	// LoadedAt is when it was loaded (an archive) or its last image pulled (a list).
	LoadedAt string `json:"loadedAt,omitempty"`
	// LoadFailures counts the loads of an archive that failed in a row; RetryAt is when
	// the next is tried (failed loads are retried with backoff, up to every 5 minutes).
	LoadFailures int    `json:"loadFailures,omitempty"`
	RetryAt      string `json:"retryAt,omitempty"`
	// Images is, for a list, the state of each listed reference: "pending" (not tried
	// yet), "pulling", "present" (the engine has it), or "failed: <error>" (retrying).
	Images map[string]string `json:"images,omitempty"`
}

// Origins of Preloaded.Refs.
const (
	OriginLoaded   = "loaded"
	OriginManifest = "manifest"
	OriginSaved    = "saved"
	OriginListed   = "listed"
)

// Kinds and states of Preloaded.
const (
	// PreloadArchive is an image archive (docker save or OCI).
	PreloadArchive = "archive"
	// PreloadList is a .txt file listing image references to pull.
	PreloadList = "list"
	// PreloadPending: not processed yet (incomplete, queued, loading), or a list
	// whose images are not all present yet.
	PreloadPending = "pending"
	// PreloadLoaded: loaded (or found already loaded), or every listed image present.
	PreloadLoaded = "loaded"
	// PreloadFailed: the archive did not load (Failed says why); it pins what its
	// manifest names or what it loaded last.
	PreloadFailed = "failed"
)

// DefaultConfig returns the configuration used when no flag changes it.
func DefaultConfig() Config {
	return Config{
		SandboxImage: DefaultSandboxImage,
		ConfigLabels: true,
		SnapshotTTL:  2 * time.Second,
		WarnInterval: 10 * time.Minute,
	}
}

// Validate parses every pattern and selector; the error names each bad item.
func (c Config) Validate() error {
	_, err := compileRules(c)
	return err
}

// rules is the compiled, immutable form of the static part of a Config.
type rules struct {
	sandbox      *pin.Pattern
	configLabels bool
	patterns     []pin.Pattern
	selectors    []pin.LabelSelector
	preload      []pin.Pattern // exact references; text is "<tarball>: <ref>"
}

func compileRules(c Config) (*rules, error) {
	r := &rules{configLabels: c.ConfigLabels}
	var errs []error
	sandbox, err := parseSandbox(c.SandboxImage)
	errs = append(errs, err)
	r.sandbox = sandbox
	r.patterns, err = pin.ParsePatterns(c.Patterns)
	errs = append(errs, err)
	r.selectors, err = pin.ParseLabelSelectors(c.LabelSelectors)
	errs = append(errs, err)
	r.preload, err = parsePreloaded(c.Preloaded)
	errs = append(errs, err)
	errs = append(errs, checkDurations(c))
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return r, nil
}

// parseSandbox parses the sandbox image as an exact reference.
func parseSandbox(image string) (*pin.Pattern, error) {
	text := strings.TrimSpace(image)
	if text == "" {
		return nil, nil
	}
	p, err := pin.ParseExact(text)
	if err != nil {
		return nil, fmt.Errorf("invalid sandbox image %q: %w", text, err)
	}
	return &p, nil
}

// parsePreloaded turns what the preload tarballs loaded into exact patterns whose
// text says where they came from.
func parsePreloaded(loaded []Preloaded) ([]pin.Pattern, error) {
	var out []pin.Pattern
	var errs []error
	for _, l := range loaded {
		for _, ref := range l.Refs {
			p, err := pin.ParseExact(strings.TrimSpace(ref))
			if err != nil {
				errs = append(errs, fmt.Errorf("invalid reference %q loaded from %s: %w", ref, l.Tarball, err))
				continue
			}
			out = append(out, p.WithText(l.Tarball+": "+ref))
		}
	}
	return out, errors.Join(errs...)
}

func checkDurations(c Config) error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"max staleness", c.MaxStaleness}, {"snapshot ttl", c.SnapshotTTL}, {"warn interval", c.WarnInterval}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("invalid %s %s: must not be negative", d.name, d.v))
		}
	}
	return errors.Join(errs...)
}

// HasPinsFiles tells whether a pins file or a pins directory is configured.
func (c *Config) HasPinsFiles() bool {
	return c.PinsFile != "" || c.PinsDir != ""
}

// pinsFilesText names the configured pins file and directory, for messages.
func (c *Config) pinsFilesText() string {
	var parts []string
	if c.PinsFile != "" {
		parts = append(parts, "file "+c.PinsFile)
	}
	if c.PinsDir != "" {
		parts = append(parts, "directory "+c.PinsDir)
	}
	return strings.Join(parts, ", ")
}
