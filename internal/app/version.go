package app

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// upstreamRelease is the newest upstream cri-dockerd release this binary is a drop-in for.
// Our version is this release plus semver build metadata naming our build
// (docs/compatibility.md, "Versions"): semver ranks it equal to the release, dpkg and rpm above it.
const upstreamRelease = "0.4.3"

// Set at link time (Makefile): -X github.com/dockpin/cri-dockerd/internal/app.build=dockpin.<commits>.g<commit>
// and -X ….gitCommit=<full commit>.
var (
	build     = "dockpin.dev"
	gitCommit = ""
)

// versionString is "<upstream release>+<build>", e.g. 0.4.3+dockpin.175.g1a2b3c4.
func versionString() string {
	return upstreamRelease + "+" + build
}

func commit() string {
	if gitCommit != "" {
		return gitCommit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}

// printVersion prints upstream's first line, `cri-dockerd <version> (<short commit>)`, which
// tools such as minikube parse.
func printVersion(w io.Writer) {
	fmt.Fprintf(w, "cri-dockerd %s (%s)\n", versionString(), shortCommit())
}

func printBuildInfo(w io.Writer) {
	fmt.Fprintf(w, "Program: cri-dockerd\nVersion: %s\nGitCommit: %s\nGo version: %s\n", versionString(), commit(), runtime.Version())
}

func shortCommit() string {
	c := commit()
	if len(c) > 7 {
		return c[:7]
	}
	return c
}
