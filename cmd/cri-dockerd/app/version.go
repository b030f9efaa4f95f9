package app

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Set at link time: -X github.com/dockpin/cri-dockerd/cmd/cri-dockerd/app.version=... (and gitCommit).
var (
	version   = "0.4.1-dockpin.dev"
	gitCommit = ""
)

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

func printVersion(w io.Writer) {
	fmt.Fprintf(w, "cri-dockerd %s (%s)\n", version, shortCommit())
}

func printBuildInfo(w io.Writer) {
	fmt.Fprintf(w, "Program: cri-dockerd\nVersion: %s\nGitCommit: %s\nGo version: %s\n", version, commit(), runtime.Version())
}

func shortCommit() string {
	c := commit()
	if len(c) > 7 {
		return c[:7]
	}
	return c
}
