package deploy_test

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestComposeSlots checks compose's model of builds side by side: two
// worker slots, worker-a always on and worker-b only in its profile, alike
// but for the image and the build id each takes from deploy/.env; and the
// upgrade its header documents runs the steps in the order rollout.sh does
// (start the new slot, promote from it, roll the ingress, wait for
// `siteops release drained`, only then stop the old build).
func TestComposeSlots(t *testing.T) {
	services := composeServices(t)
	a, b := services["worker-a"], services["worker-b"]
	if a == nil || b == nil {
		t.Fatalf("compose.yaml has no worker-a or no worker-b service")
	}
	if a["profiles"] != nil || services["ingress"]["profiles"] != nil {
		t.Errorf("worker-a (profiles %v) and the ingress (profiles %v) must start with a plain `up`", a["profiles"], services["ingress"]["profiles"])
	}
	if p := strs(list(b["profiles"])); !slices.Equal(p, []string{"worker-b"}) {
		t.Errorf("worker-b is in the profiles %v; want [worker-b], so that `up` starts it only when named", p)
	}
	for name, slot := range map[string]string{"worker-a": "WORKER_A", "worker-b": "WORKER_B"} {
		if id := composeEnv(services[name])["SITEOPS_BUILD_ID"]; !strings.HasPrefix(id, "${"+slot+"_BUILD_ID:?") {
			t.Errorf("compose %s: SITEOPS_BUILD_ID=%q; want ${%s_BUILD_ID:?...} from deploy/.env", name, id, slot)
		}
	}
	// Alike but for the image, the build id and the profile.
	strip := func(svc map[string]any) map[string]any {
		c := maps.Clone(svc)
		delete(c, "image")
		delete(c, "profiles")
		env := maps.Clone(mapOf(c["environment"]))
		delete(env, "SITEOPS_BUILD_ID")
		c["environment"] = env
		return c
	}
	if sa, sb := strip(a), strip(b); !reflect.DeepEqual(sa, sb) {
		t.Errorf("the worker slots differ beyond their image, build id and profile:\nworker-a %v\nworker-b %v", sa, sb)
	}

	// The documented upgrade, in the order that strands nothing.
	header := commentHeader(read(t, "compose.yaml"))
	if !strings.Contains(header, "C is `docker compose -f deploy/compose.yaml --profile worker-b`") {
		t.Errorf("compose.yaml's header does not define $C with the profile worker-b (compose stop/start/exec need it)")
	}
	inOrder(t, strings.Split(header, "\n"),
		"$C up -d --no-deps --wait worker-b",
		"$C exec -T worker-b /siteops release promote --build-id B",
		"$C up -d --no-deps --wait ingress",
		"until $C exec -T worker-b /siteops release drained --build-id A; do",
		"$C up -d --no-deps --wait worker-a",
		"$C stop worker-b")
	for _, sub := range [][]string{{"promote", "--build-id"}, {"drained", "--build-id"}, {"rollback", "--to-build-id"}} {
		checkReleaseFlags(t, sub[0], sub[1])
	}
}

// commentHeader is the comment at the top of a YAML file, without the #s.
func commentHeader(text string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, "#")
		if !ok {
			break
		}
		out = append(out, strings.TrimPrefix(rest, " "))
	}
	return strings.Join(out, "\n")
}
