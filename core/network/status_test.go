package network

import (
	"encoding/json"
	"net"
	"testing"

	"gotest.tools/v3/assert"
)

func ips(ss ...string) []net.IP {
	out := make([]net.IP, 0, len(ss))
	for _, s := range ss {
		out = append(out, net.ParseIP(s))
	}
	return out
}

func TestToResult(t *testing.T) {
	tests := []struct {
		name string
		json string
		want []net.IP
	}{
		{name: "interfaces named", json: `{"cniVersion":"1.0.0","interfaces":[{"name":"cni0"},{"name":"eth0","sandbox":"/ns"}],
			"ips":[{"address":"fd00::5/64","interface":1},{"address":"10.0.0.1/24","interface":0},{"address":"10.0.0.5/24","interface":1}]}`,
			want: ips("10.0.0.5", "fd00::5")},
		{name: "no interfaces", json: `{"cniVersion":"1.0.0","ips":[{"address":"fd00::5/64"},{"address":"10.0.0.5/24"},{"address":"10.0.0.6/24"}]}`,
			want: ips("10.0.0.5", "10.0.0.6", "fd00::5")},
		{name: "old version", json: `{"cniVersion":"0.2.0","ip4":{"ip":"10.0.0.7/24"}}`,
			want: ips("10.0.0.7")},
		{name: "no IPs", json: `{"cniVersion":"1.0.0"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v struct {
				CNIVersion string `json:"cniVersion"`
			}
			assert.NilError(t, json.Unmarshal([]byte(tt.json), &v))
			res, err := resultFromJSON(v.CNIVersion, []byte(tt.json))
			assert.NilError(t, err)
			r, err := toResult(res)
			assert.NilError(t, err)
			assert.DeepEqual(t, r.IPs, tt.want)
			assert.Equal(t, r.Interface, "eth0")
		})
	}
}
