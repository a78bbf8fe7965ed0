package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// rawCodec passes gRPC messages through as bytes, so that the proxy needs
// no knowledge of Temporal's API.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("rawCodec: %T", v)
	}
	return *b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("rawCodec: %T", v)
	}
	*b = append((*b)[:0], data...)
	return nil
}

func (rawCodec) Name() string { return "proto" }

// authProxy is a gRPC front for a Temporal server, as a cloud frontend
// is: it records the authorization metadata every call carries and the
// methods called, then forwards the call unchanged. It shows on the
// server side what a client sent, which reading the client's options
// back cannot.
type authProxy struct {
	addr string

	mu      sync.Mutex
	auths   map[string]int // authorization value → calls
	calls   int
	methods []string // in the order they were called
}

// startAuthProxy serves TLS with cert/key on 127.0.0.1 and forwards to
// backend (plaintext).
func startAuthProxy(t *testing.T, certFile, keyFile, backend string) *authProxy {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return startProxy(t, backend, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})))
}

// startPlainProxy serves plaintext on 127.0.0.1 and forwards to backend.
func startPlainProxy(t *testing.T, backend string) *authProxy {
	t.Helper()
	return startProxy(t, backend)
}

func startProxy(t *testing.T, backend string, opts ...grpc.ServerOption) *authProxy {
	t.Helper()
	upstream, err := grpc.NewClient(backend, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	p := &authProxy{auths: map[string]int{}}
	srv := grpc.NewServer(append(opts,
		grpc.ForceServerCodec(rawCodec{}),
		grpc.UnknownServiceHandler(func(_ any, in grpc.ServerStream) error { return p.forward(in, upstream) }),
	)...)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Stop(); _ = upstream.Close() })
	return p
}

func (p *authProxy) forward(in grpc.ServerStream, upstream *grpc.ClientConn) error {
	method, _ := grpc.MethodFromServerStream(in)
	md, _ := metadata.FromIncomingContext(in.Context())
	p.mu.Lock()
	p.calls++
	p.methods = append(p.methods, path.Base(method))
	for _, v := range md.Get("authorization") {
		p.auths[v]++
	}
	p.mu.Unlock()
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(in.Context(), md.Copy()))
	defer cancel()
	out, err := upstream.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() {
		for {
			var msg []byte
			if err := in.RecvMsg(&msg); err != nil {
				if errors.Is(err, io.EOF) {
					errc <- out.CloseSend()
					return
				}
				errc <- err
				return
			}
			if err := out.SendMsg(&msg); err != nil {
				errc <- err
				return
			}
		}
	}()
	header, err := out.Header()
	if err != nil {
		return err
	}
	if err := in.SendHeader(header); err != nil {
		return err
	}
	for {
		var msg []byte
		if err := out.RecvMsg(&msg); err != nil {
			in.SetTrailer(out.Trailer())
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := in.SendMsg(&msg); err != nil {
			return err
		}
	}
}

// sawAuthorization reports how many calls carried exactly value, and how
// many calls there were.
func (p *authProxy) sawAuthorization(value string) (matching, calls int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.auths[value], p.calls
}

// calledAfter reports whether method was called after a call of first,
// both named as in the service (StartWorkflowExecution).
func (p *authProxy) calledAfter(first, method string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.Index(p.methods, first)
	return i >= 0 && slices.Contains(p.methods[i+1:], method)
}

// otherAuthorizations lists the authorization values other than want.
func (p *authProxy) otherAuthorizations(want string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for v := range p.auths {
		if v != want {
			out = append(out, strings.TrimSpace(v))
		}
	}
	return out
}
