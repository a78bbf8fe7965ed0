package codec

import (
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

func mustProtoJSON(t *testing.T, p *commonpb.Payload) []byte {
	t.Helper()
	b, err := protojson.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
