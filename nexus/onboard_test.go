package nexus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	nexusrpc "github.com/nexus-rpc/sdk-go/nexus"
	"go.temporal.io/sdk/temporal"

	"github.com/siteops/siteops/nexus/api"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
)

// texts is a TextStore in memory.
type texts map[string]string

func (m texts) PutKnowledgeText(_ context.Context, text string) (string, error) {
	h := store.KnowledgeHash(text)
	m[h] = text
	return h, nil
}

func (m texts) PutKnowledgeTexts(ctx context.Context, all []string) ([]string, error) {
	hashes := make([]string, len(all))
	for i, text := range all {
		hashes[i], _ = m.PutKnowledgeText(ctx, text)
	}
	return hashes, nil
}

func (m texts) PutKnowledgeTextAs(ctx context.Context, _, text string, _ store.TextQuota) (string, error) {
	return m.PutKnowledgeText(ctx, text)
}

func (m texts) KnowledgeText(_ context.Context, hash string) (string, error) {
	if t, ok := m[hash]; ok {
		return t, nil
	}
	return "", fmt.Errorf("%w: knowledge text %s", store.ErrNotFound, hash)
}

func onboardInput() api.OnboardInput {
	return api.OnboardInput{
		Site:  api.Site{Title: "T", Slug: "t", Type: "business", Template: "minimal", PersonaMode: "assistant", Languages: []string{"en"}},
		Agent: api.Agent{EmbedEnabled: false},
		FAQs:  []api.FAQ{{Question: "q", Answer: "a", Approved: true}},
	}
}

func TestPrepareKeysInlineTextsAndCountsCharacters(t *testing.T) {
	st := texts{}
	stored, _ := st.PutKnowledgeText(t.Context(), "Stored before, by store-knowledge.")
	s, err := New(Options{Texts: st})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("é", 150_000) // far over the 8,000 characters a workflow input may carry inline
	in := onboardInput()
	in.Knowledge = []api.Knowledge{{Name: "long", Text: long}, {Name: "by hash", TextHash: stored}}
	p, err := s.prepare(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	k := p.Input.Knowledge
	if len(k) != 2 || k[0].Text != "" || k[0].TextHash != store.KnowledgeHash(long) || k[0].Chars != 150_000 || k[1].Chars != 34 {
		t.Errorf("knowledge = %+v", k)
	}
	if len(p.Texts) != 1 || p.Texts[store.KnowledgeHash(long)] != long {
		t.Errorf("the inline texts to store are %d, want the long one", len(p.Texts))
	}
	if _, ok := st[store.KnowledgeHash(long)]; ok {
		t.Error("prepare stored a text before the request was admitted")
	}
	if err := s.storeTexts(t.Context(), Caller{}, p.Texts); err != nil || st[store.KnowledgeHash(long)] != long {
		t.Errorf("storeTexts: %v; want the inline text stored", err)
	}
}

func TestPrepareRefusesEveryProblemAtOnceAndStoresNothing(t *testing.T) {
	st := texts{}
	s, _ := New(Options{Texts: st})
	in := onboardInput()
	in.Site.Slug = "a/b"
	in.Knowledge = []api.Knowledge{
		{Name: "inline", Text: "A text that would be stored."},
		{Name: "unknown", TextHash: store.KnowledgeHash("never stored")},
		{Name: "miscounted", Text: "Twelve chars", Chars: 99},
	}
	_, err := s.prepare(t.Context(), in)
	var he *nexusrpc.HandlerError
	var app *temporal.ApplicationError
	if !errors.As(err, &he) || he.Type != nexusrpc.HandlerErrorTypeBadRequest || he.Retryable() || !errors.As(err, &app) || app.Type() != api.ErrTypeInvalidSpec {
		t.Fatalf("err = %#v", err)
	}
	for _, want := range []string{"site.slug", "knowledge[1].text_hash", "store-knowledge", "knowledge[2].chars: is 99 but the text has 12"} {
		if !strings.Contains(app.Message(), want) {
			t.Errorf("the refusal %q does not name %q", app.Message(), want)
		}
	}
	if len(st) != 0 {
		t.Errorf("an invalid onboarding stored %d text(s)", len(st))
	}
}

func TestHandlerErrorKinds(t *testing.T) {
	for _, c := range []struct {
		err       error
		kind      nexusrpc.HandlerErrorType // empty: an operation error
		state     nexusrpc.OperationState
		causeType string
	}{
		{&starter.InvalidSpecError{}, nexusrpc.HandlerErrorTypeBadRequest, "", api.ErrTypeInvalidSpec},
		{&starter.SpecConflictError{WorkflowID: "onboarding/x", Differences: []string{"site.title"}}, nexusrpc.HandlerErrorTypeBadRequest, "", api.ErrTypeSpecConflict},
		{&starter.RejectedError{WorkflowID: "embed-incident/s", Reason: "already decided"}, nexusrpc.HandlerErrorTypeBadRequest, "", api.ErrTypeRejected},
		{fmt.Errorf("site s: %w", starter.ErrNoOpenIncident), nexusrpc.HandlerErrorTypeNotFound, "", api.ErrTypeNotFound},
		{&starter.WorkflowFailedError{WorkflowID: "w", Status: "Failed", Cause: starter.Failure{Message: "gone", Type: "NotFound", Status: 404}}, "", nexusrpc.OperationStateFailed, "NotFound"},
		{&starter.WorkflowFailedError{WorkflowID: "w", Status: "Canceled", Cause: starter.Failure{Message: "canceled", Type: "Canceled"}}, "", nexusrpc.OperationStateCanceled, "Canceled"},
	} {
		err := handlerError(c.err)
		var he *nexusrpc.HandlerError
		var oe *nexusrpc.OperationError
		var app *temporal.ApplicationError
		switch {
		case c.kind != "" && (!errors.As(err, &he) || he.Type != c.kind || he.Retryable()):
			t.Errorf("%T: %#v, want a non-retryable %s", c.err, err, c.kind)
		case c.kind == "" && (!errors.As(err, &oe) || oe.State != c.state):
			t.Errorf("%T: %#v, want a %s operation", c.err, err, c.state)
		case !errors.As(err, &app) || app.Type() != c.causeType:
			t.Errorf("%T: cause %v, want type %s", c.err, err, c.causeType)
		}
	}
	// A partner is told what it can do, not a command of on-call's CLI.
	var app *temporal.ApplicationError
	conflict := handlerError(&starter.SpecConflictError{WorkflowID: "onboarding/x", Differences: []string{"site.title"}})
	if !errors.As(conflict, &app) {
		t.Fatalf("a spec conflict: %#v, want an application error", conflict)
	}
	if msg := app.Message(); strings.Contains(msg, "siteops status") || !strings.Contains(msg, "site.title") || !strings.Contains(msg, api.OnboardingStatusName+` {"slug": "x"}`) {
		t.Errorf("the partner's conflict message = %q; want site.title and %s {\"slug\": \"x\"}, without siteops status", msg, api.OnboardingStatusName)
	}
	other := errors.New("temporal unavailable")
	if handlerError(other) != other { //nolint:errorlint // the very error, unwrapped and unchanged
		t.Error("an unknown error was not left to the SDK")
	}
}
