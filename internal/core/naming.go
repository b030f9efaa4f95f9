package core

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Engine container names, as upstream cri-dockerd (and dockershim before it) writes them:
//
//	k8s_POD_<pod>_<namespace>_<uid>_<attempt>            (sandbox)
//	k8s_<container>_<pod>_<namespace>_<uid>_<attempt>    (container)
//
// optionally followed by "_<8 hex>" when the plain name was taken.
const (
	namePrefix    = "k8s"
	sandboxName   = "POD"
	nameDelimiter = "_"
)

// makeSandboxName returns the engine name of a sandbox.
func makeSandboxName(md *runtimeapi.PodSandboxMetadata) string {
	return strings.Join([]string{
		namePrefix, sandboxName, md.GetName(), md.GetNamespace(), md.GetUid(),
		strconv.FormatUint(uint64(md.GetAttempt()), 10),
	}, nameDelimiter)
}

// makeContainerName returns the engine name of a container of a sandbox.
func makeContainerName(sb *runtimeapi.PodSandboxConfig, md *runtimeapi.ContainerMetadata) string {
	pod := sb.GetMetadata()
	return strings.Join([]string{
		namePrefix, md.GetName(), pod.GetName(), pod.GetNamespace(), pod.GetUid(),
		strconv.FormatUint(uint64(md.GetAttempt()), 10),
	}, nameDelimiter)
}

// withRandomSuffix returns name with "_<8 hex>" appended, upstream's way out of a
// name conflict with a container the engine still holds.
func withRandomSuffix(name string) string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return name + nameDelimiter + hex.EncodeToString(b[:])
}

// parsedName is what an engine name tells about a sandbox or container.
type parsedName struct {
	container string // "POD" for sandboxes
	pod       string
	namespace string
	uid       string
	attempt   uint32
}

// parseName parses a name made by makeSandboxName or makeContainerName, with or
// without the random suffix and a leading "/".
func parseName(name string) (parsedName, error) {
	parts := strings.Split(strings.TrimPrefix(name, "/"), nameDelimiter)
	if (len(parts) != 6 && len(parts) != 7) || parts[0] != namePrefix {
		return parsedName{}, fmt.Errorf("container name %q is not a kubernetes container name: %w", name, cerrdefs.ErrInvalidArgument)
	}
	attempt, err := strconv.ParseUint(parts[5], 10, 32)
	if err != nil {
		return parsedName{}, fmt.Errorf("container name %q has a bad attempt %q: %w", name, parts[5], cerrdefs.ErrInvalidArgument)
	}
	return parsedName{container: parts[1], pod: parts[2], namespace: parts[3], uid: parts[4], attempt: uint32(attempt)}, nil
}
