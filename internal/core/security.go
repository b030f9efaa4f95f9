package core

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// securityOpts turns the CRI's seccomp, AppArmor and SELinux settings into engine
// security options. A nil seccomp profile means unconfined, as kubelet means it
// (it sends RuntimeDefault explicitly when a pod asks for the runtime's default).
func securityOpts(seccomp, apparmor *runtimeapi.SecurityProfile, selinux *runtimeapi.SELinuxOption, privileged bool) ([]string, error) {
	var opts []string
	if !privileged { // the engine runs privileged containers unconfined anyway
		o, err := seccompOpt(seccomp)
		if err != nil {
			return nil, err
		}
		if o != "" {
			opts = append(opts, o)
		}
	}
	switch apparmor.GetProfileType() {
	case runtimeapi.SecurityProfile_RuntimeDefault:
	case runtimeapi.SecurityProfile_Unconfined:
		opts = append(opts, "apparmor=unconfined")
	case runtimeapi.SecurityProfile_Localhost:
		opts = append(opts, "apparmor="+strings.TrimPrefix(apparmor.GetLocalhostRef(), "localhost/"))
	}
	if selinux != nil {
		for _, kv := range [][2]string{{"user", selinux.GetUser()}, {"role", selinux.GetRole()}, {"type", selinux.GetType()}, {"level", selinux.GetLevel()}} {
			if kv[1] != "" {
				opts = append(opts, "label="+kv[0]+":"+kv[1])
			}
		}
	}
	return opts, nil
}

// seccompOpt returns the engine option for a seccomp profile ("" = engine default).
func seccompOpt(p *runtimeapi.SecurityProfile) (string, error) {
	if p == nil {
		return "seccomp=unconfined", nil
	}
	switch p.GetProfileType() {
	case runtimeapi.SecurityProfile_RuntimeDefault:
		return "", nil
	case runtimeapi.SecurityProfile_Unconfined:
		return "seccomp=unconfined", nil
	case runtimeapi.SecurityProfile_Localhost:
		ref := strings.TrimPrefix(p.GetLocalhostRef(), "localhost/")
		b, err := os.ReadFile(ref)
		if err != nil {
			return "", fmt.Errorf("seccomp profile %q: %w: %w", ref, err, cerrdefs.ErrInvalidArgument)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, b); err != nil {
			return "", fmt.Errorf("seccomp profile %q is not JSON: %w: %w", ref, err, cerrdefs.ErrInvalidArgument)
		}
		return "seccomp=" + compact.String(), nil
	}
	return "", fmt.Errorf("seccomp profile type %v: %w", p.GetProfileType(), cerrdefs.ErrInvalidArgument)
}

// engineUser returns the engine's user option for a uid or user name and an optional gid.
func engineUser(uid *runtimeapi.Int64Value, name string, gid *runtimeapi.Int64Value) (string, error) {
	user := name
	if uid != nil {
		user = strconv.FormatInt(uid.GetValue(), 10)
	}
	if gid != nil {
		if user == "" {
			return "", fmt.Errorf("run_as_group is set without run_as_user or run_as_username: %w", cerrdefs.ErrInvalidArgument)
		}
		user += ":" + strconv.FormatInt(gid.GetValue(), 10)
	}
	return user, nil
}

// groupAdd formats supplemental group ids for the engine.
func groupAdd(gids []int64) []string {
	out := make([]string, 0, len(gids))
	for _, g := range gids {
		out = append(out, strconv.FormatInt(g, 10))
	}
	return out
}
