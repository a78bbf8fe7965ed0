package wiring

import (
	"context"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/proto"
)

// The SDK gzips every request to Temporal, and the server then gzips its
// answer too. For the calls siteops makes most (the relay's signals, the
// workers' activity completions and heartbeats) the request is a few
// hundred bytes and the answer a few dozen: a request under
// smallRequest fits one TCP segment compressed or not, so gzip saves no
// packet, and it costs both ends CPU on every call (BenchmarkRelayDispatch
// measured about a third of the SignalWithStart call's CPU in this
// process in grpc's gzip; bench/README.md). These calls are therefore
// sent uncompressed below smallRequest, and the server answers them
// uncompressed (it answers in the encoding it was asked in). Every other
// call keeps gzip: polls and history reads, whose answers are large, and
// any request over smallRequest.
const smallRequest = 1 << 10

// smallAnswers are the calls whose answers stay small whatever they carry.
// StartWorkflowExecution is not one of them (its answer may carry an
// eager workflow task with its history), nor RespondWorkflowTaskCompleted
// (it may carry the next workflow task).
var smallAnswers = map[string]bool{
	workflowservice.WorkflowService_SignalWithStartWorkflowExecution_FullMethodName: true,
	workflowservice.WorkflowService_SignalWorkflowExecution_FullMethodName:          true,
	workflowservice.WorkflowService_RespondActivityTaskCompleted_FullMethodName:     true,
	workflowservice.WorkflowService_RespondActivityTaskFailed_FullMethodName:        true,
	workflowservice.WorkflowService_RecordActivityTaskHeartbeat_FullMethodName:      true,
}

// uncompressedSmallCalls sends the calls of smallAnswers uncompressed when
// their request is under smallRequest.
func uncompressedSmallCalls(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if smallAnswers[method] {
		if m, ok := req.(proto.Message); ok && proto.Size(m) < smallRequest {
			// Appended last, so that it overrides the SDK's default gzip.
			opts = append(opts[:len(opts):len(opts)], grpc.UseCompressor(encoding.Identity))
		}
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// compressOnlyWhereItPays adds uncompressedSmallCalls to o: every other
// call keeps the SDK's default gzip.
func compressOnlyWhereItPays(o *client.Options) {
	o.ConnectionOptions.DialOptions = append(o.ConnectionOptions.DialOptions, grpc.WithChainUnaryInterceptor(uncompressedSmallCalls))
}
