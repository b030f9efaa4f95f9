package checkpoint

import (
	"fmt"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
)

// fuzzFile is checkpoint file content for data (as JSON) with the checksum of want.
func fuzzFile(dataJSON string, want *Data) []byte {
	return fmt.Appendf(nil, `{"version":"v1","name":"n","namespace":"ns","data":%s,"checksum":%d}`, dataJSON, Checksum(want))
}

// FuzzDecode checks that decoding never panics on arbitrary bytes (nil port mappings
// and nil fields with valid checksums included), that what fails is a data loss, and
// that a checkpoint that decodes and verifies re-encodes to bytes that decode to an
// equal checkpoint and re-encode to the same bytes.
func FuzzDecode(f *testing.F) {
	tcp, p80, p0 := ProtocolTCP, int32(80), int32(0)
	for _, b := range [][]byte{
		fuzzFile(`{"port_mappings":[null]}`, &Data{PortMappings: []*PortMapping{nil}}),
		fuzzFile(`{"port_mappings":[null,null],"host_network":true}`, &Data{PortMappings: []*PortMapping{nil, nil}, HostNetwork: true}),
		fuzzFile(`{"port_mappings":[{}]}`, &Data{PortMappings: []*PortMapping{{}}}),
		fuzzFile(`{"port_mappings":[{"protocol":"tcp","container_port":80,"host_port":0,"host_ip":"127.0.0.1"},null]}`,
			&Data{PortMappings: []*PortMapping{{Protocol: &tcp, ContainerPort: &p80, HostPort: &p0, HostIP: "127.0.0.1"}, nil}}),
		fuzzFile(`{"port_mappings":[]}`, &Data{PortMappings: []*PortMapping{}}),
		fuzzFile(`{}`, &Data{}),
		fuzzFile(`null`, &Data{}),
		[]byte(`{"version":"v1","name":"n","namespace":"ns","data":{"port_mappings":[{"protocol":"tcp","container_port":80,"host_port":18080}]},"checksum":2344035810}`),
		[]byte(`{"version":"v1","name":"web","namespace":"prod","data":{"host_network":true},"checksum":12315789,"extra":1}`),
		[]byte(`{"version":"v1","data":{},"checksum":"x"}`),
		[]byte(`{"checksum":-1}`),
		[]byte(``),
		[]byte(`garbage`),
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decode(b)
		if err != nil {
			assert.Assert(t, cerrdefs.IsDataLoss(err), "%v", err)
			assert.Assert(t, c == nil)
			return
		}
		assert.Assert(t, c.Data != nil)
		assert.Equal(t, c.Checksum, Checksum(c.Data))

		enc, err := encode(c)
		assert.NilError(t, err)
		c2, err := decode(enc)
		if c.Data.PortMappings != nil && len(c.Data.PortMappings) == 0 {
			// Documented on Data.PortMappings: an empty list and none have different
			// checksums, and only none survives encoding ("port_mappings" is omitted
			// when empty), as with upstream's types. Write is never given an empty one.
			assert.Assert(t, cerrdefs.IsDataLoss(err), "%v", err)
			return
		}
		assert.NilError(t, err, "%s decodes, its encoding %s does not", b, enc)
		assert.DeepEqual(t, c2, c)
		enc2, err := encode(c2)
		assert.NilError(t, err)
		assert.Equal(t, string(enc2), string(enc))
	})
}
