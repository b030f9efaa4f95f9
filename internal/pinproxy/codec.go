package pinproxy

import (
	"fmt"

	"google.golang.org/protobuf/proto"
)

// frame is one gRPC message as it travels on the wire: the proxy forwards it without
// decoding it, so RPCs this build does not know pass through unchanged.
type frame struct {
	payload []byte
}

// rawCodec passes frames through as they are and marshals proto messages as the
// default codec does. It is named "proto" so that the backend sees the content type
// kubelet sent ("application/grpc+proto" is the default "application/grpc").
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	switch m := v.(type) {
	case *frame:
		return m.payload, nil
	case proto.Message:
		return proto.Marshal(m)
	}
	return nil, fmt.Errorf("proxy codec: cannot marshal %T", v)
}

// Unmarshal keeps data: gRPC hands the codec a fresh copy of each message.
func (rawCodec) Unmarshal(data []byte, v any) error {
	switch m := v.(type) {
	case *frame:
		m.payload = data
		return nil
	case proto.Message:
		return proto.Unmarshal(data, m)
	}
	return fmt.Errorf("proxy codec: cannot unmarshal into %T", v)
}
