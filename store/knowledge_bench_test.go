package store_test

import (
	"fmt"
	"testing"

	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// BenchmarkStoreSpecTexts times what a start of an onboarding whose 500
// texts are all stored already costs the store: one PutKnowledgeText per
// text (how the starter stored them before c9290d4) against one
// PutKnowledgeTexts for all of them.
//
//	go test -run '^$' -bench BenchmarkStoreSpecTexts ./store/
func BenchmarkStoreSpecTexts(b *testing.B) {
	const sources = 500
	texts := make([]string, sources)
	for i := range texts {
		texts[i] = fmt.Sprintf("knowledge source %d of a large spec", i)
	}
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		for _, how := range []string{"one-call-per-text", "one-call"} {
			b.Run(fmt.Sprintf("store=%s/%s", d, how), func(b *testing.B) {
				st := storetest.Open(b, d)
				if _, err := st.PutKnowledgeTexts(b.Context(), texts); err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if how == "one-call" {
						if _, err := st.PutKnowledgeTexts(b.Context(), texts); err != nil {
							b.Fatal(err)
						}
						continue
					}
					for _, text := range texts {
						if _, err := st.PutKnowledgeText(b.Context(), text); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}
