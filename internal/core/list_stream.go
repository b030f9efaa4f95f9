package core

import (
	"google.golang.org/protobuf/proto"
)

// streamChunkBytes bounds the encoded size of one message of a streaming list (KEP-5825):
// far below gRPC's 16 MiB limit, so that a stream never holds more than one such chunk
// in its send buffer whatever the node's size.
const streamChunkBytes = 1 << 20

// streamChunks serves a streaming list from its unary list's answer: items, or err when
// the list failed; each chunk is wrapped as the stream's message and sent.
func streamChunks[I proto.Message, M any](items []I, err error, send func(*M) error, wrap func([]I) *M) error {
	if err != nil {
		return err
	}
	return sendChunks(items, func(part []I) error { return send(wrap(part)) })
}

// sendChunks sends items in order, as messages of at least one item and at most about
// streamChunkBytes each, every item exactly once; an empty list sends nothing (the
// stream's end says it all). It stops at the first failed send.
func sendChunks[T proto.Message](items []T, send func([]T) error) error {
	start, size := 0, 0
	for i, item := range items {
		n := proto.Size(item) + 8 // the field's tag and length
		if i > start && size+n > streamChunkBytes {
			if err := send(items[start:i]); err != nil {
				return err
			}
			start, size = i, 0
		}
		size += n
	}
	if start < len(items) {
		return send(items[start:])
	}
	return nil
}
