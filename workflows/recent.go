package workflows

// recentIDs remembers the latest event ids a workflow counted, at most
// most of them, so that a redelivered event is counted once; its list
// carries across continue-as-new.
type recentIDs struct {
	most int
	seen map[string]bool
	list []string
}

// newRecentIDs remembers ids (the previous run's), oldest first.
func newRecentIDs(most int, ids []string) *recentIDs {
	r := &recentIDs{most: most, seen: map[string]bool{}}
	for _, id := range ids {
		r.remember(id)
	}
	return r
}

func (r *recentIDs) has(id string) bool { return r.seen[id] }

func (r *recentIDs) remember(id string) {
	r.seen[id] = true
	r.list = append(r.list, id)
	if len(r.list) > r.most {
		delete(r.seen, r.list[0])
		r.list = r.list[1:]
	}
}

// ids is a copy of the ids remembered, oldest first.
func (r *recentIDs) ids() []string { return append([]string(nil), r.list...) }
