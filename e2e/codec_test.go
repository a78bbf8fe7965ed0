package e2e

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/siteops/siteops/codec"
	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/e2e/testenv"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/wiring"
	"github.com/siteops/siteops/workflows"
)

// TestPayloadEncryption onboards a site with SITEOPS_PAYLOAD_KEY set for
// the worker and the starter: the result reads back, and the history on the
// server holds only ciphertext, in the current format, bound to the
// namespace: a codec of another namespace with the same key refuses it.
func TestPayloadEncryption(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	rawKey := []byte("payload-key-for-e2e-0123456789ab")
	key := base64.StdEncoding.EncodeToString(rawKey)
	tc := config.Temporal{Address: e.Address, Namespace: e.Namespace, TaskQueue: taskQueue, PayloadKey: key}
	c, _, err := wiring.DialTemporal(t.Context(), tc, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e.StartWorker(t, testenv.WorkerOptions{PayloadKey: key})
	s := starter.New(starter.Options{Client: c, Texts: e.Store, TaskQueue: taskQueue})
	o, err := s.Onboard(t.Context(), prepare(t, "../examples/bayside-dental.json", "bayside"))
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.OnboardingResult
	if err := o.Run.Get(ctxWithin(t, time.Minute), &res); err != nil || res.Status != "published" {
		t.Fatalf("result %+v, %v", res, err)
	}
	// The plain client (no key) sees ciphertext only.
	it := e.Client.GetWorkflowHistory(t.Context(), o.WorkflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var raw strings.Builder
	var input *commonpb.Payload
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		raw.WriteString(ev.String())
		if in := ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads(); input == nil && len(in) > 0 {
			input = in[0]
		}
	}
	for _, plain := range []string{"Bayside Dental", "baysidedental.example", "Gentle dentistry"} {
		if strings.Contains(raw.String(), plain) {
			t.Errorf("history holds %q in the clear", plain)
		}
	}
	if !strings.Contains(raw.String(), "binary/encrypted") {
		t.Errorf("history has no encrypted payloads")
	}
	// The worker and the starter write the current format, whose outer
	// metadata is authenticated.
	if !strings.Contains(raw.String(), "encryption-version") {
		t.Errorf("history has no payloads of encryption version 2")
	}
	if input == nil {
		t.Fatal("the history has no workflow input")
	}
	if got := string(input.GetMetadata()["encryption-namespace"]); got != e.Namespace {
		t.Errorf("the input is bound to namespace %q, want %q", got, e.Namespace)
	}
	for ns, wantErr := range map[string]bool{e.Namespace: false, "another-namespace": true} {
		c, err := codec.New(codec.Options{Keys: [][]byte{rawKey}, Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Decode([]*commonpb.Payload{input}); (err != nil) != wantErr {
			t.Errorf("the input read in namespace %s: %v, want an error: %v", ns, err, wantErr)
		}
	}
}

// TestCodecKeyRotationThroughTemporal runs an onboarding in the middle of
// a payload-key rotation from key A to key B, as the runbook in docs/payload-encryption.md
// goes: the starter has B added at the end of its ring ("A,B": A still
// encrypts), the worker already has it first ("B,A"). The input in the
// history is written under A, the result under B, and both processes read
// everything; a process with "B" alone cannot read A's input, and its
// error names A's key ID, never a key.
func TestCodecKeyRotationThroughTemporal(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	rawA, rawB := []byte("payload-key-A-for-e2e-0123456789"), []byte("payload-key-B-for-e2e-0123456789")
	keyA, keyB := base64.StdEncoding.EncodeToString(rawA), base64.StdEncoding.EncodeToString(rawB)
	dial := func(ring string) *starter.Starter {
		tc := config.Temporal{Address: e.Address, Namespace: e.Namespace, TaskQueue: taskQueue, PayloadKey: ring}
		c, _, err := wiring.DialTemporal(t.Context(), tc, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return starter.New(starter.Options{Client: c, Texts: e.Store, TaskQueue: taskQueue})
	}
	e.StartWorker(t, testenv.WorkerOptions{PayloadKey: keyB + "," + keyA})
	rotated := dial(keyB + "," + keyA) // a client of the worker's ring

	o, err := dial(keyA+","+keyB).Onboard(t.Context(), prepare(t, "../examples/bayside-dental.json", "rotation"))
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.OnboardingResult
	if err := o.Run.Get(ctxWithin(t, time.Minute), &res); err != nil || res.Status != "published" {
		t.Fatalf("the starter with the ring A,B read the result %+v, %v; want published", res, err)
	}

	var input, result *commonpb.Payload
	it := e.Client.GetWorkflowHistory(t.Context(), o.WorkflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if p := ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads(); len(p) > 0 {
			input = p[0]
		}
		if p := ev.GetWorkflowExecutionCompletedEventAttributes().GetResult().GetPayloads(); len(p) > 0 {
			result = p[0]
		}
	}
	if input == nil || result == nil {
		t.Fatalf("the history lacks the input (%v) or the result (%v)", input != nil, result != nil)
	}
	// The result crosses the Nexus boundary to partners without the key:
	// it is plaintext, authenticated under the key (nexus.Plaintext).
	for _, tt := range []struct {
		name, meta string
		p          *commonpb.Payload
		want       []byte
	}{{"the input, written by the starter", "encryption-key-id", input, rawA}, {"the result, written by the worker", "authentication-key-id", result, rawB}} {
		if got := string(tt.p.GetMetadata()[tt.meta]); got != codec.KeyID(tt.want) {
			t.Errorf("%s is under key %s (%s), want %s", tt.name, got, tt.meta, codec.KeyID(tt.want))
		}
	}
	if err := rotated.Client().GetWorkflow(t.Context(), o.WorkflowID, "").Get(t.Context(), &res); err != nil {
		t.Errorf("a client with the worker's ring B,A reading the result: %v; want it read", err)
	}

	onlyB, err := codec.New(codec.Options{Keys: [][]byte{rawB}, Namespace: e.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	_, err = onlyB.Decode([]*commonpb.Payload{input})
	if err == nil || !strings.Contains(err.Error(), codec.KeyID(rawA)) {
		t.Fatalf("A's input read with the ring B = %v; want an error naming key %s", err, codec.KeyID(rawA))
	}
	if strings.Contains(err.Error(), keyA) || strings.Contains(err.Error(), string(rawA)) {
		t.Errorf("the error shows key A: %v", err)
	}
}

// TestCodecServerCommandKeyRingAndNamespace runs `siteops codec-server`
// with the key ring "B,A": it says which key encrypts, decodes a payload
// written under A for the namespace the request names, refuses a request
// that names none (400, naming X-Namespace) and a payload bound to another
// namespace.
func TestCodecServerCommandKeyRingAndNamespace(t *testing.T) {
	rawA := []byte("payload-key-for-e2e-0123456789ab") // startCodecCommand's key
	rawB := []byte("payload-key-B-for-e2e-0123456789")
	ring := base64.StdEncoding.EncodeToString(rawB) + "," + base64.StdEncoding.EncodeToString(rawA)
	c := startCodecCommand(t, []string{"SITEOPS_PAYLOAD_KEY=" + ring})
	if want := "keys " + codec.KeyID(rawB) + " (encrypts), " + codec.KeyID(rawA); !strings.Contains(c.stdout, want) {
		t.Errorf("codec-server printed %q, want it to name %q", c.stdout, want)
	}
	underA, err := codec.New(codec.Options{Keys: [][]byte{rawA}, Namespace: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := underA.DataConverter().ToPayload("hello")
	if err != nil {
		t.Fatal(err)
	}
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: []*commonpb.Payload{p}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, namespace string
		want            int
		wantBody        string
	}{
		{"for its namespace", "prod", http.StatusOK, base64.StdEncoding.EncodeToString([]byte(`"hello"`))},
		{"without X-Namespace", "", http.StatusBadRequest, "X-Namespace"},
		{"for another namespace", "staging", http.StatusBadRequest, "do not move between namespaces"},
	} {
		req, _ := http.NewRequestWithContext(ctxWithin(t, 10*time.Second), http.MethodPost, c.url+"/decode", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if tt.namespace != "" {
			req.Header.Set("X-Namespace", tt.namespace)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		_ = resp.Body.Close()
		if resp.StatusCode != tt.want || !strings.Contains(string(b), tt.wantBody) {
			t.Errorf("decode %s = %d %s; want %d with %q", tt.name, resp.StatusCode, b, tt.want, tt.wantBody)
		}
	}
	c.stop(t)
	if !strings.Contains(c.stderr.String(), "X-Namespace") {
		t.Errorf("codec-server did not log the request without X-Namespace:\n%s", c.stderr.String())
	}
}

// TestCodecServerCommandRefusesToListenBeyondLoopback runs `siteops
// codec-server --addr 0.0.0.0:…` without a token: it exits 2 before
// serving, with one line naming the fixes.
func TestCodecServerCommandRefusesToListenBeyondLoopback(t *testing.T) {
	cmd := exec.CommandContext(ctxWithin(t, 30*time.Second), binary, "codec-server", "--addr", "0.0.0.0:0")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SITEOPS_CODEC_TOKEN") { // no token, from the variable or a file
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "SITEOPS_PAYLOAD_KEY="+base64.StdEncoding.EncodeToString([]byte("payload-key-for-e2e-0123456789ab")))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("codec-server --addr 0.0.0.0:0 without a token = %v, want exit 2; stdout %q, stderr %q", err, stdout.String(), stderr.String())
	}
	line := strings.TrimSpace(stderr.String())
	for _, want := range []string{"SITEOPS_CODEC_TOKEN", "--token-file", "127.0.0.1"} {
		if !strings.Contains(line, want) {
			t.Errorf("the refusal %q does not name %s", line, want)
		}
	}
	if strings.Count(line, "\n") != 0 || stdout.Len() != 0 {
		t.Errorf("codec-server said %q on stderr and %q on stdout; want one line on stderr", line, stdout.String())
	}
}
