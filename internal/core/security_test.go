package core

import (
	"os"
	"path/filepath"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// writeSeccompProfile writes a pretty-printed seccomp profile into a temp dir.
func writeSeccompProfile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "profile.json")
	assert.NilError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

const prettySeccomp = `{
  "defaultAction": "SCMP_ACT_ERRNO",
  "syscalls": [
    { "names": ["read", "write"], "action": "SCMP_ACT_ALLOW" }
  ]
}
`

const compactSeccomp = `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read","write"],"action":"SCMP_ACT_ALLOW"}]}`

func TestSeccompOpt(t *testing.T) {
	profile := writeSeccompProfile(t, prettySeccomp)
	notJSON := writeSeccompProfile(t, "defaultAction: allow")
	for _, tc := range []struct {
		name    string
		p       *runtimeapi.SecurityProfile
		want    string
		wantErr bool
	}{
		{name: "nil is unconfined", p: nil, want: "seccomp=unconfined"},
		{name: "runtime default", p: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, want: ""},
		{name: "unconfined", p: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, want: "seccomp=unconfined"},
		{name: "localhost", p: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: profile}, want: "seccomp=" + compactSeccomp},
		{name: "localhost prefix", p: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "localhost/" + profile}, want: "seccomp=" + compactSeccomp},
		{name: "localhost missing", p: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: filepath.Join(t.TempDir(), "nope.json")}, wantErr: true},
		{name: "localhost not json", p: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: notJSON}, wantErr: true},
		{name: "unknown type", p: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_ProfileType(42)}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := seccompOpt(tc.p)
			if tc.wantErr {
				assert.Check(t, cerrdefs.IsInvalidArgument(err), "got %q, %v", got, err)
				return
			}
			assert.NilError(t, err)
			assert.Equal(t, got, tc.want)
		})
	}
}

func TestSecurityOpts(t *testing.T) {
	runtimeDefault := &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	for _, tc := range []struct {
		name       string
		seccomp    *runtimeapi.SecurityProfile
		apparmor   *runtimeapi.SecurityProfile
		selinux    *runtimeapi.SELinuxOption
		privileged bool
		want       []string
	}{
		{name: "all nil", want: []string{"seccomp=unconfined"}},
		{name: "privileged skips seccomp", privileged: true, want: nil},
		{name: "runtime default everywhere", seccomp: runtimeDefault, apparmor: runtimeDefault, want: nil},
		{
			name: "apparmor unconfined", seccomp: runtimeDefault,
			apparmor: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined},
			want:     []string{"apparmor=unconfined"},
		},
		{
			name: "apparmor localhost", seccomp: runtimeDefault,
			apparmor: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "localhost/k8s-nginx"},
			want:     []string{"apparmor=k8s-nginx"},
		},
		{
			name: "selinux", seccomp: runtimeDefault,
			selinux: &runtimeapi.SELinuxOption{User: "system_u", Role: "system_r", Type: "container_t", Level: "s0:c1,c2"},
			want:    []string{"label=user:system_u", "label=role:system_r", "label=type:container_t", "label=level:s0:c1,c2"},
		},
		{
			name: "selinux partial", seccomp: runtimeDefault,
			selinux: &runtimeapi.SELinuxOption{Level: "s0"},
			want:    []string{"label=level:s0"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := securityOpts(tc.seccomp, tc.apparmor, tc.selinux, tc.privileged)
			assert.NilError(t, err)
			assert.DeepEqual(t, got, tc.want)
		})
	}
}

func TestEngineUser(t *testing.T) {
	for _, tc := range []struct {
		name     string
		uid, gid *runtimeapi.Int64Value
		username string
		want     string
		wantErr  bool
	}{
		{name: "none", want: ""},
		{name: "uid", uid: &runtimeapi.Int64Value{Value: 1000}, want: "1000"},
		{name: "uid 0", uid: &runtimeapi.Int64Value{Value: 0}, want: "0"},
		{name: "uid and gid", uid: &runtimeapi.Int64Value{Value: 1000}, gid: &runtimeapi.Int64Value{Value: 2000}, want: "1000:2000"},
		{name: "username", username: "www-data", want: "www-data"},
		{name: "username and gid", username: "www-data", gid: &runtimeapi.Int64Value{Value: 33}, want: "www-data:33"},
		{name: "uid wins over username", uid: &runtimeapi.Int64Value{Value: 5}, username: "www-data", want: "5"},
		{name: "gid alone", gid: &runtimeapi.Int64Value{Value: 2000}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := engineUser(tc.uid, tc.username, tc.gid)
			if tc.wantErr {
				assert.Check(t, cerrdefs.IsInvalidArgument(err), "got %q, %v", got, err)
				return
			}
			assert.NilError(t, err)
			assert.Equal(t, got, tc.want)
		})
	}
}

func TestGroupAdd(t *testing.T) {
	assert.DeepEqual(t, groupAdd(nil), []string{})
	assert.DeepEqual(t, groupAdd([]int64{0, 1000, 65534}), []string{"0", "1000", "65534"})
}
