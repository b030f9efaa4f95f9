package checkpoint

import (
	"strconv"
	"strings"
)

// render returns the text upstream cri-dockerd hashes for a checkpoint: go-spew's
// "%#v" formatting (ConfigState{Indent: " ", SortKeys: true, DisableMethods: true,
// SpewKeys: true}) of the data as a value of upstream's types core.CheckpointData,
// config.PortMapping and config.Protocol. It is not a general spew clone; it
// reproduces that formatter for these types only, rule by rule (checked against
// go-spew v1.1.1, see the vectors in render_test.go):
//
//   - every value shows its type in parentheses before it, "(bool)false",
//     "(string)10.0.0.1", except where spew suppresses the type (below);
//   - struct fields are "Name:value" separated by one space inside "{...}";
//   - a nil slice is "([]*config.PortMapping)<nil>", a non-nil one lists its
//     elements inside "[...]" separated by one space ("[]" when empty);
//   - a slice element shows no type: a non-nil *PortMapping is "<*>" followed
//     by the struct without a type, a nil one is just "<nil>";
//   - a non-nil pointer field is its type then the pointee without a type,
//     "(*int32)80", "(*config.Protocol)tcp"; a nil one is "(*int32)<nil>";
//   - strings (HostIP, Protocol) are written raw: not quoted, not escaped, so
//     an empty one leaves nothing after its type, "HostIP:(string)}";
//   - integers are decimal with a leading "-" when negative, bools are
//     "true"/"false";
//   - spew's quirk: a nil slice element does not clear its "omit the next
//     type" flag, so when the last element is nil the next value, HostNetwork,
//     loses its type: "[<nil>] HostNetwork:false".
//
// A nil d renders as an empty Data (upstream would dereference it and panic).
func render(d *Data) string {
	if d == nil {
		d = &Data{}
	}
	var b strings.Builder
	b.WriteString("(core.CheckpointData){PortMappings:([]*config.PortMapping)")
	omitType := false
	if d.PortMappings == nil {
		b.WriteString("<nil>")
	} else {
		b.WriteByte('[')
		for i, pm := range d.PortMappings {
			if i > 0 {
				b.WriteByte(' ')
			}
			omitType = pm == nil
			if pm == nil {
				b.WriteString("<nil>")
				continue
			}
			b.WriteString("<*>{Protocol:(*config.Protocol)")
			if pm.Protocol == nil {
				b.WriteString("<nil>")
			} else {
				b.WriteString(string(*pm.Protocol))
			}
			b.WriteString(" ContainerPort:(*int32)")
			writeInt32Ptr(&b, pm.ContainerPort)
			b.WriteString(" HostPort:(*int32)")
			writeInt32Ptr(&b, pm.HostPort)
			b.WriteString(" HostIP:(string)")
			b.WriteString(pm.HostIP)
			b.WriteByte('}')
		}
		b.WriteByte(']')
	}
	b.WriteString(" HostNetwork:")
	if !omitType {
		b.WriteString("(bool)")
	}
	b.WriteString(strconv.FormatBool(d.HostNetwork))
	b.WriteByte('}')
	return b.String()
}

// writeInt32Ptr writes the pointee of p in decimal, or "<nil>".
func writeInt32Ptr(b *strings.Builder, p *int32) {
	if p == nil {
		b.WriteString("<nil>")
		return
	}
	b.WriteString(strconv.FormatInt(int64(*p), 10))
}
