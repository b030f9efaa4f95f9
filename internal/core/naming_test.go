package core

import (
	"regexp"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestMakeSandboxName(t *testing.T) {
	md := &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "prod", Uid: "u-1", Attempt: 3}
	name := makeSandboxName(md)
	assert.Equal(t, name, "k8s_POD_web_prod_u-1_3")
	got, err := parseName(name)
	assert.NilError(t, err)
	assert.Equal(t, got, parsedName{container: "POD", pod: "web", namespace: "prod", uid: "u-1", attempt: 3})
}

func TestMakeContainerName(t *testing.T) {
	sb := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "prod", Uid: "u-1", Attempt: 3}}
	name := makeContainerName(sb, &runtimeapi.ContainerMetadata{Name: "nginx", Attempt: 7})
	assert.Equal(t, name, "k8s_nginx_web_prod_u-1_7")
	got, err := parseName(name)
	assert.NilError(t, err)
	assert.Equal(t, got, parsedName{container: "nginx", pod: "web", namespace: "prod", uid: "u-1", attempt: 7})
}

func TestWithRandomSuffix(t *testing.T) {
	name := withRandomSuffix("k8s_POD_web_prod_u-1_0")
	assert.Check(t, regexp.MustCompile(`^k8s_POD_web_prod_u-1_0_[0-9a-f]{8}$`).MatchString(name), name)
	assert.Check(t, name != withRandomSuffix("k8s_POD_web_prod_u-1_0"), "suffixes should differ")
	got, err := parseName(name)
	assert.NilError(t, err)
	assert.Equal(t, got, parsedName{container: "POD", pod: "web", namespace: "prod", uid: "u-1", attempt: 0})
}

func TestParseName(t *testing.T) {
	for _, tc := range []struct {
		name    string
		want    parsedName
		wantErr bool
	}{
		{name: "k8s_POD_web_prod_uid_0", want: parsedName{container: "POD", pod: "web", namespace: "prod", uid: "uid"}},
		{name: "/k8s_POD_web_prod_uid_0", want: parsedName{container: "POD", pod: "web", namespace: "prod", uid: "uid"}},
		{name: "k8s_app_web_prod_uid_12_0a1b2c3d", want: parsedName{container: "app", pod: "web", namespace: "prod", uid: "uid", attempt: 12}},
		{name: "/k8s_app_web_prod_uid_4294967295", want: parsedName{container: "app", pod: "web", namespace: "prod", uid: "uid", attempt: 4294967295}},
		{name: "", wantErr: true},
		{name: "nginx", wantErr: true},
		{name: "k8s_web_prod_uid_0", wantErr: true},                // 5 parts
		{name: "k8s_app_web_prod_uid_0_abcd_extra", wantErr: true}, // 8 parts
		{name: "k9s_POD_web_prod_uid_0", wantErr: true},            // wrong prefix
		{name: "K8S_POD_web_prod_uid_0", wantErr: true},
		{name: "//k8s_POD_web_prod_uid_0", wantErr: true},
		{name: "k8s_POD_web_prod_uid_x", wantErr: true},          // bad attempt
		{name: "k8s_POD_web_prod_uid_-1", wantErr: true},         // negative attempt
		{name: "k8s_POD_web_prod_uid_4294967296", wantErr: true}, // attempt beyond uint32
		{name: "k8s_POD_web_prod_uid_", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseName(tc.name)
			if tc.wantErr {
				assert.Check(t, cerrdefs.IsInvalidArgument(err), "got %+v, %v", got, err)
				return
			}
			assert.NilError(t, err)
			assert.Equal(t, got, tc.want)
		})
	}
}

func TestNameRoundTrip(t *testing.T) {
	for _, md := range []*runtimeapi.PodSandboxMetadata{
		{Name: "a", Namespace: "b", Uid: "c"},
		{Name: "coredns-7db6d8ff4d-x2x9z", Namespace: "kube-system", Uid: "5f0a1b2c-3d4e-5f60-7182-93a4b5c6d7e8", Attempt: 42},
	} {
		sb := &runtimeapi.PodSandboxConfig{Metadata: md}
		for _, name := range []string{makeSandboxName(md), withRandomSuffix(makeSandboxName(md)), "/" + makeSandboxName(md)} {
			got, err := parseName(name)
			assert.NilError(t, err, name)
			assert.Equal(t, got, parsedName{container: "POD", pod: md.Name, namespace: md.Namespace, uid: md.Uid, attempt: md.Attempt})
		}
		cmd := &runtimeapi.ContainerMetadata{Name: "c1", Attempt: 2}
		for _, name := range []string{makeContainerName(sb, cmd), withRandomSuffix(makeContainerName(sb, cmd))} {
			got, err := parseName(name)
			assert.NilError(t, err, name)
			assert.Equal(t, got, parsedName{container: "c1", pod: md.Name, namespace: md.Namespace, uid: md.Uid, attempt: 2})
		}
	}
}
