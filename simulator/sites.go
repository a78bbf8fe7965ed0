package simulator

import (
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/agentsite/webhook"
)

type site struct {
	ID          string                `json:"id"`
	Title       string                `json:"title"`
	Slug        string                `json:"slug"`
	Type        string                `json:"type"`
	Template    string                `json:"template"`
	Content     agentsite.SiteContent `json:"content"`
	PersonaMode string                `json:"persona_mode"`
	Languages   []string              `json:"languages"`
	Status      string                `json:"status"`
	CreatedAt   time.Time             `json:"created_at"`

	agent     agentState
	knowledge []*knowledge
	faqs      []faq
	leads     []lead
}

type agentState struct {
	DisplayName    string   `json:"display_name"`
	PersonaMode    string   `json:"persona_mode"`
	Instructions   string   `json:"instructions"`
	Languages      []string `json:"languages"`
	EmbedEnabled   bool     `json:"embed_enabled"`
	AllowedOrigins []string `json:"allowed_origins"`
}

type knowledge struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Status    string `json:"status"`
	Chars     int    `json:"characters"`
	siteID    string
	createdAt time.Time
}

type faq struct {
	ID       string `json:"id"`
	Question string `json:"question"`
	Answer   string `json:"answer"`
	Approved bool   `json:"approved"`
}

var slugPattern = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$`)

func (s *Simulator) createSite(_ *http.Request, body []byte) response {
	var in struct {
		Title       string                 `json:"title"`
		Slug        string                 `json:"slug"`
		Type        string                 `json:"type"`
		Template    string                 `json:"template"`
		Content     *agentsite.SiteContent `json:"content"`
		PersonaMode string                 `json:"persona_mode"`
		Languages   []string               `json:"languages"`
	}
	if bad := decodeStrict(body, &in); bad != nil {
		return *bad
	}
	for _, f := range []struct{ name, value string }{{"title", in.Title}, {"slug", in.Slug}, {"type", in.Type}, {"template", in.Template}} {
		if strings.TrimSpace(f.value) == "" {
			return fail(http.StatusUnprocessableEntity, "required", f.name+" is required", f.name)
		}
	}
	if !slugPattern.MatchString(in.Slug) {
		return fail(http.StatusUnprocessableEntity, "invalid_slug", "a slug is 1 to 63 lowercase letters, digits and hyphens, not starting or ending with a hyphen", "slug")
	}
	if in.PersonaMode == "" {
		in.PersonaMode = "assistant"
	}
	if in.Languages == nil {
		in.Languages = []string{"en"}
	}
	if r := checkLanguages(in.Languages); r != nil {
		return *r
	}
	var content agentsite.SiteContent
	if in.Content != nil {
		content = *in.Content
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireIdempotencyLocked(s.now())
	if _, taken := s.slugs[in.Slug]; taken {
		return fail(http.StatusConflict, "slug_taken", "another site already has the slug "+in.Slug, "slug")
	}
	st := &site{
		ID: s.nextID("site"), Title: in.Title, Slug: in.Slug, Type: in.Type, Template: in.Template,
		Content: content, PersonaMode: in.PersonaMode, Languages: in.Languages,
		Status: agentsite.SiteDraft, CreatedAt: s.now().UTC(),
		agent: agentState{DisplayName: in.Title, PersonaMode: in.PersonaMode, Languages: in.Languages, AllowedOrigins: []string{}},
	}
	s.sites[st.ID] = st
	s.slugs[st.Slug] = st.ID
	resp := ok(http.StatusCreated, map[string]any{"data": st})
	resp.location = "/api/v1/sites/" + st.ID
	return resp
}

func checkLanguages(langs []string) *response {
	if len(langs) == 0 {
		r := fail(http.StatusUnprocessableEntity, "invalid_languages", "languages needs at least one language code, e.g. en", "languages")
		return &r
	}
	for _, l := range langs {
		if len(l) < 2 || len(l) > 35 || strings.ContainsAny(l, " \t") {
			r := fail(http.StatusUnprocessableEntity, "invalid_languages", "languages holds codes such as en or pt-BR", "languages")
			return &r
		}
	}
	return nil
}

// siteLocked returns the site of the path or a 404 answer. s.mu is held.
func (s *Simulator) siteLocked(r *http.Request) (*site, *response) {
	st := s.sites[r.PathValue("site_id")]
	if st == nil {
		resp := fail(http.StatusNotFound, "site_not_found", "no site with id "+r.PathValue("site_id"), "site_id")
		return nil, &resp
	}
	return st, nil
}

func (s *Simulator) getSite(r *http.Request, _ []byte) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, bad := s.siteLocked(r)
	if bad != nil {
		return *bad
	}
	return ok(http.StatusOK, map[string]any{"data": st})
}

func (s *Simulator) updateAgent(r *http.Request, body []byte) response {
	var in struct {
		DisplayName    *string   `json:"display_name"`
		PersonaMode    *string   `json:"persona_mode"`
		Instructions   *string   `json:"instructions"`
		Languages      *[]string `json:"languages"`
		EmbedEnabled   *bool     `json:"embed_enabled"`
		AllowedOrigins *[]string `json:"allowed_origins"`
	}
	if bad := decodeStrict(body, &in); bad != nil {
		return *bad
	}
	if in.DisplayName == nil && in.PersonaMode == nil && in.Instructions == nil && in.Languages == nil && in.EmbedEnabled == nil && in.AllowedOrigins == nil {
		return fail(http.StatusUnprocessableEntity, "empty_update", "the update sets no field", "")
	}
	if in.DisplayName != nil && strings.TrimSpace(*in.DisplayName) == "" {
		return fail(http.StatusUnprocessableEntity, "required", "display_name cannot be empty", "display_name")
	}
	if in.Languages != nil {
		if r := checkLanguages(*in.Languages); r != nil {
			return *r
		}
	}
	if in.AllowedOrigins != nil {
		if field, problem := checkOrigins(*in.AllowedOrigins); problem != "" {
			return fail(http.StatusUnprocessableEntity, "invalid_origin", "allowed_origins entries are exact origins (scheme, host, optional port; no path, no wildcard): "+field+": "+problem, field)
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	st, bad := s.siteLocked(r)
	if bad != nil {
		return *bad
	}
	a := &st.agent
	if in.DisplayName != nil {
		a.DisplayName = *in.DisplayName
	}
	if in.PersonaMode != nil {
		a.PersonaMode = *in.PersonaMode
	}
	if in.Instructions != nil {
		a.Instructions = *in.Instructions
	}
	if in.Languages != nil {
		a.Languages = *in.Languages
	}
	if in.EmbedEnabled != nil {
		a.EmbedEnabled = *in.EmbedEnabled
	}
	if in.AllowedOrigins != nil {
		a.AllowedOrigins = *in.AllowedOrigins
	}
	return ok(http.StatusOK, map[string]any{"data": a})
}

func (s *Simulator) addKnowledge(r *http.Request, body []byte) response {
	var in struct {
		Name *string `json:"name"`
		Text *string `json:"text"`
	}
	if bad := decodeStrict(body, &in); bad != nil {
		return *bad
	}
	if in.Name == nil || strings.TrimSpace(*in.Name) == "" {
		return fail(http.StatusUnprocessableEntity, "required", "name is required", "name")
	}
	if in.Text == nil {
		return fail(http.StatusUnprocessableEntity, "required", "text is required", "text")
	}
	if problem := checkKnowledgeText(*in.Text); problem != "" {
		return fail(http.StatusUnprocessableEntity, "invalid_text", problem, "text")
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	st, bad := s.siteLocked(r)
	if bad != nil {
		return *bad
	}
	k := &knowledge{ID: s.nextID("kn"), Name: *in.Name, Status: "processing", Chars: len([]rune(*in.Text)), siteID: st.ID, createdAt: s.now()}
	st.knowledge = append(st.knowledge, k)
	s.after(s.scaled(s.cfg.KnowledgeDelay), func() { s.knowledgeReady(k) })
	return ok(http.StatusCreated, map[string]any{"data": k})
}

func (s *Simulator) knowledgeReady(k *knowledge) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k.Status = "ready"
	s.emitLocked(webhook.KnowledgeReady, map[string]string{"site_id": k.siteID, "knowledge_id": k.ID})
}

func (s *Simulator) addFAQ(r *http.Request, body []byte) response {
	var in struct {
		Question *string `json:"question"`
		Answer   *string `json:"answer"`
		Approved *bool   `json:"approved"`
	}
	if bad := decodeStrict(body, &in); bad != nil {
		return *bad
	}
	if in.Question == nil || strings.TrimSpace(*in.Question) == "" {
		return fail(http.StatusUnprocessableEntity, "required", "question is required", "question")
	}
	if in.Answer == nil || strings.TrimSpace(*in.Answer) == "" {
		return fail(http.StatusUnprocessableEntity, "required", "answer is required", "answer")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, bad := s.siteLocked(r)
	if bad != nil {
		return *bad
	}
	f := faq{ID: s.nextID("faq"), Question: *in.Question, Answer: *in.Answer, Approved: in.Approved != nil && *in.Approved}
	st.faqs = append(st.faqs, f)
	return ok(http.StatusCreated, map[string]any{"data": f})
}

func (s *Simulator) publish(r *http.Request, body []byte) response {
	var in struct {
		Published *bool `json:"published"`
	}
	if bad := decodeStrict(body, &in); bad != nil {
		return *bad
	}
	if in.Published == nil {
		return fail(http.StatusUnprocessableEntity, "required", "published (true or false) is required", "published")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, bad := s.siteLocked(r)
	if bad != nil {
		return *bad
	}
	want := agentsite.SiteDraft
	event := webhook.SiteUnpublished
	if *in.Published {
		want, event = agentsite.SitePublished, webhook.SitePublished
	}
	if st.Status != want {
		st.Status = want
		s.emitLocked(event, map[string]string{"site_id": st.ID, "status": want})
	}
	return ok(http.StatusOK, map[string]any{"data": map[string]string{"id": st.ID, "status": st.Status}})
}
