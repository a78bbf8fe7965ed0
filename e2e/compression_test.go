package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/wiring"
)

// TestSmallCallsGoUncompressed dials the dev server as every siteops
// process does and reads, from gRPC's own accounting of the connection,
// the encoding each call was sent in and answered in: a small signal goes
// and comes back uncompressed, while a signal over a KiB and a history
// read keep the SDK's gzip both ways.
func TestSmallCallsGoUncompressed(t *testing.T) {
	seen := &encodings{by: map[string][]string{}}
	o, _, err := wiring.TemporalOptions(config.Temporal{TaskQueue: "siteops", Address: server(0).Address, Namespace: "default"}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	o.ConnectionOptions.DialOptions = append(o.ConnectionOptions.DialOptions, grpc.WithStatsHandler(seen))
	c, err := client.DialContext(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	id := fmt.Sprintf("compression-%d", time.Now().UnixNano())
	start := client.StartWorkflowOptions{ID: id, TaskQueue: "compression-no-worker"}
	if _, err := c.SignalWithStartWorkflow(ctx, id, "small", "a few bytes", start, "NoSuchWorkflow"); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.TerminateWorkflow(context.Background(), id, "", "test over") }()
	if err := c.SignalWorkflow(ctx, id, "", "large", strings.Repeat("a large signal ", 200)); err != nil {
		t.Fatal(err)
	}
	it := c.GetWorkflowHistory(ctx, id, "", false, 0)
	for it.HasNext() {
		if _, err := it.Next(); err != nil {
			t.Fatal(err)
		}
	}

	const (
		signalWithStart = "/temporal.api.workflowservice.v1.WorkflowService/SignalWithStartWorkflowExecution"
		signal          = "/temporal.api.workflowservice.v1.WorkflowService/SignalWorkflowExecution"
		history         = "/temporal.api.workflowservice.v1.WorkflowService/GetWorkflowExecutionHistory"
	)
	for _, want := range []struct{ method, sent, answered string }{
		{signalWithStart, "identity", ""},
		{signal, "gzip", "gzip"},
		{history, "gzip", "gzip"},
	} {
		got := seen.of(want.method)
		if len(got) != 2 || got[0] != want.sent || got[1] != want.answered {
			t.Errorf("%s: sent and answered in %q, want [%q %q]", want.method[strings.LastIndex(want.method, "/")+1:], got, want.sent, want.answered)
		}
	}
}

// encodings is a gRPC stats handler that keeps, per method, the encoding
// of the request's header and of the answer's, in that order.
type encodings struct {
	mu sync.Mutex
	by map[string][]string
}

type methodKey struct{}

func (e *encodings) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, methodKey{}, info.FullMethodName)
}

func (e *encodings) HandleRPC(ctx context.Context, s stats.RPCStats) {
	method, _ := ctx.Value(methodKey{}).(string)
	e.mu.Lock()
	defer e.mu.Unlock()
	switch h := s.(type) {
	case *stats.OutHeader:
		e.by[method] = []string{h.Compression}
	case *stats.InHeader:
		e.by[method] = append(e.by[method], h.Compression)
	}
}

func (e *encodings) of(method string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.by[method]
}

func (*encodings) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (*encodings) HandleConn(context.Context, stats.ConnStats)                       {}
