package grpcapi

import (
	"testing"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// TestHealthCodec: the hand-written encoding of grpc.health.v1 agrees with
// the generated one, in both forms.
func TestHealthCodec(t *testing.T) {
	bin := healthCodec{"proto"}
	for _, svc := range []string{"", "warren.v1.SessionService"} {
		b, err := proto.Marshal(&healthpb.HealthCheckRequest{Service: svc})
		if err != nil {
			t.Fatal(err)
		}
		var got healthRequest
		if err := bin.Unmarshal(b, &got); err != nil || got.Service != svc {
			t.Errorf("Unmarshal(%x) = %+v, %v; want service %q", b, got, err, svc)
		}
	}
	// An unknown field (a newer client's) is skipped.
	b := append([]byte{0x10, 0x05}, []byte{0x0a, 0x01, 'x'}...)
	var got healthRequest
	if err := bin.Unmarshal(b, &got); err != nil || got.Service != "x" {
		t.Errorf("Unmarshal with an unknown field = %+v, %v", got, err)
	}
	if err := bin.Unmarshal([]byte{0x0a, 0x05, 'x'}, &got); err == nil {
		t.Errorf("Unmarshal of a truncated message succeeded")
	}

	for _, st := range []int32{healthServing, healthNotServing} {
		b, err := bin.Marshal(&healthResponse{Status: st})
		if err != nil {
			t.Fatal(err)
		}
		var res healthpb.HealthCheckResponse
		if err := proto.Unmarshal(b, &res); err != nil || int32(res.GetStatus()) != st {
			t.Errorf("Marshal(%d) = %x: decodes to %v, %v", st, b, res.GetStatus(), err)
		}
		j, err := healthCodec{"json"}.Marshal(&healthResponse{Status: st})
		if err != nil {
			t.Fatal(err)
		}
		var jres healthpb.HealthCheckResponse
		if err := protojson.Unmarshal(j, &jres); err != nil || int32(jres.GetStatus()) != st {
			t.Errorf("JSON Marshal(%d) = %s: decodes to %v, %v", st, j, jres.GetStatus(), err)
		}
	}
}
