// Command nfpkg builds cri-dockerd-dockpin's .deb and .rpm from packaging/nfpm.yaml with nfpm's library.
// It is a module of its own (hack/tools), so that nfpm stays out of the daemon's dependencies.
//
// The one thing the YAML cannot say: the Epoch differs per format. The rpm carries upstream's
// Epoch (3), so that our Provides outranks upstream's 3:<version>; the deb has none, as upstream's.
//
// Usage: nfpkg -config packaging/nfpm.yaml -version 0.4.3+dockpin.N.gC -arch amd64 -out _output/packages
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	_ "github.com/goreleaser/nfpm/v2/rpm" // registers the rpm packager
)

func main() {
	var o options
	flag.StringVar(&o.config, "config", "packaging/nfpm.yaml", "nfpm configuration")
	flag.StringVar(&o.version, "version", "", "package version (the binary's, from --version)")
	flag.StringVar(&o.arch, "arch", "amd64", "GOARCH of the binary")
	flag.StringVar(&o.out, "out", "_output/packages", "directory the packages are written to")
	flag.StringVar(&o.rpmEpoch, "rpm-epoch", "3", "Epoch of the rpm (upstream's is 3)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "nfpkg:", err)
		os.Exit(1)
	}
}

type options struct {
	config, version, arch, out, rpmEpoch string
}

func run(o options) error {
	if o.version == "" {
		return errors.New("-version is required")
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	// Upstream's unit directory for each format.
	unitDir := map[string]string{"deb": "/lib/systemd/system", "rpm": "/usr/lib/systemd/system"}
	for _, format := range []string{"deb", "rpm"} {
		env := func(k string) string {
			switch k {
			case "VERSION":
				return o.version
			case "ARCH":
				return o.arch
			case "UNITDIR":
				return unitDir[format]
			}
			return os.Getenv(k)
		}
		cfg, err := nfpm.ParseFileWithEnvMapping(o.config, env)
		if err != nil {
			return fmt.Errorf("%s: %w", o.config, err)
		}
		info, err := cfg.Get(format)
		if err != nil {
			return fmt.Errorf("%s: %w", format, err)
		}
		if format == "rpm" {
			info.Epoch = o.rpmEpoch
		}
		info = nfpm.WithDefaults(info)
		if err := nfpm.PrepareForPackager(info, format); err != nil {
			return fmt.Errorf("%s: %w", format, err)
		}
		if err := write(format, info, o.out); err != nil {
			return err
		}
	}
	return nil
}

// write packages info as format into dir, under the format's conventional file name.
func write(format string, info *nfpm.Info, dir string) (err error) {
	pkgr, err := nfpm.Get(format)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, pkgr.ConventionalFileName(info))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	if err := pkgr.Package(info, f); err != nil {
		return fmt.Errorf("%s: %w", format, err)
	}
	fmt.Println(path)
	return nil
}
