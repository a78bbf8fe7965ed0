package deploy_test

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// endpoint is something a pod may talk to, or be reached from: a pod (its
// namespace's labels and its own) or an address outside the cluster.
type endpoint struct {
	nsLabels, podLabels map[string]any
	ns                  string
	ip                  netip.Addr
}

func podEndpoint(ns string, labels map[string]any) endpoint {
	return endpoint{ns: ns, nsLabels: map[string]any{"kubernetes.io/metadata.name": ns}, podLabels: labels}
}

func ipEndpoint(ip string) endpoint { return endpoint{ip: netip.MustParseAddr(ip)} }

// port is a port and protocol.
type port struct {
	n     int
	proto string
}

func (p port) String() string { return fmt.Sprintf("%d/%s", p.n, p.proto) }

// selects reports whether a label selector (matchLabels, matchExpressions)
// selects labels; a nil selector selects nothing, an empty one everything.
func selects(sel any, labels map[string]any) bool {
	s, ok := sel.(map[string]any)
	if !ok {
		return false
	}
	for k, v := range mapOf(s["matchLabels"]) {
		if labels[k] != v {
			return false
		}
	}
	for _, e := range list(s["matchExpressions"]) {
		key, op := str(dig(e, "key")), str(dig(e, "operator"))
		v, has := labels[key]
		in := slices.Contains(strs(list(dig(e, "values"))), fmt.Sprint(v))
		switch op {
		case "In":
			if !has || !in {
				return false
			}
		case "NotIn":
			if has && in {
				return false
			}
		case "Exists":
			if !has {
				return false
			}
		case "DoesNotExist":
			if has {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func mapOf(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// peerMatches reports whether a peer of a rule (from/to) of a policy in
// namespace ns matches e.
func peerMatches(peer any, ns string, e endpoint) bool {
	if b := dig(peer, "ipBlock"); b != nil {
		if !e.ip.IsValid() {
			return false
		}
		if !netip.MustParsePrefix(str(dig(b, "cidr"))).Contains(e.ip) {
			return false
		}
		for _, ex := range strs(list(dig(b, "except"))) {
			if netip.MustParsePrefix(ex).Contains(e.ip) {
				return false
			}
		}
		return true
	}
	if e.ip.IsValid() {
		return false
	}
	nsSel, podSel := dig(peer, "namespaceSelector"), dig(peer, "podSelector")
	if nsSel == nil && e.ns != ns {
		return false
	}
	if nsSel != nil && !selects(nsSel, e.nsLabels) {
		return false
	}
	return podSel == nil || selects(podSel, e.podLabels)
}

// ruleAllows reports whether a rule admits e on p (peers under field,
// "from" or "to"); a rule without peers or ports admits all of them.
func ruleAllows(rule any, field, ns string, e endpoint, p port) bool {
	peers := list(dig(rule, field))
	okPeer := len(peers) == 0
	for _, peer := range peers {
		okPeer = okPeer || peerMatches(peer, ns, e)
	}
	ports := list(dig(rule, "ports"))
	okPort := len(ports) == 0
	for _, pp := range ports {
		proto := str(dig(pp, "protocol"))
		if proto == "" {
			proto = "TCP"
		}
		okPort = okPort || (num(dig(pp, "port")) == p.n && proto == p.proto)
	}
	return okPeer && okPort
}

// allowed returns, for a pod of namespace ns with labels, what the policies
// let through in one direction ("Ingress": from, "Egress": to), as
// "endpoint port" strings over the endpoints and ports given. A pod no
// policy of that direction selects allows everything.
func allowed(policies []manifest, ns string, labels map[string]any, direction string, endpoints map[string]endpoint, ports []port) []string {
	field, rules := "from", "ingress"
	if direction == "Egress" {
		field, rules = "to", "egress"
	}
	var out []string
	isolated := false
	for name, e := range endpoints {
		for _, p := range ports {
			ok := false
			for _, pol := range policies {
				if !selects(dig(pol.doc, "spec", "podSelector"), labels) || !slices.Contains(strs(list(dig(pol.doc, "spec", "policyTypes"))), direction) {
					continue
				}
				isolated = true
				for _, r := range list(dig(pol.doc, "spec", rules)) {
					ok = ok || ruleAllows(r, field, ns, e, p)
				}
			}
			if ok || !isolated {
				out = append(out, name+" "+p.String())
			}
		}
	}
	sort.Strings(out)
	return out
}

func kinds(ms []manifest, kind string) []manifest {
	var out []manifest
	for _, m := range ms {
		if m.kind() == kind {
			out = append(out, m)
		}
	}
	return out
}

// TestNetworkPolicies computes, from the NetworkPolicies of both
// namespaces, what every pod of the manifests (every build's workers
// included) may reach and be reached from, over a set of endpoints (DNS, the Temporal services, PostgreSQL at
// the policy's address, the internet, the cloud's metadata service, other
// pods, Prometheus), and compares it with what each needs and no more.
func TestNetworkPolicies(t *testing.T) {
	// The files, and every sample build's workers as rollout.sh renders
	// them: the policies select pods by label, so each build's must match.
	ms := kubernetesObjects(t)
	tms := manifests(t, temporalDir)
	policies, tpolicies := kinds(ms, "NetworkPolicy"), kinds(tms, "NetworkPolicy")
	cm := configMapData(ms)["siteops"]
	webhook := defaultPort(t, cm["SITEOPS_INGRESS_ADDR"])
	metrics := defaultPort(t, cm["SITEOPS_METRICS_ADDR"])
	admin := defaultPort(t, ":9091")
	if d, ok := find(ms, "Deployment", "siteops-ingress"); ok {
		for _, c := range containers(d, false) {
			if v := podEnv(t, d, c, configMapData(ms))["SITEOPS_INGRESS_ADMIN_ADDR"].value; v != "" {
				admin = defaultPort(t, v)
			}
		}
	}

	// default-deny: every pod, both directions, no rule.
	dd, ok := find(ms, "NetworkPolicy", "default-deny")
	if !ok || len(mapOf(dig(dd.doc, "spec", "podSelector"))) != 0 || dig(dd.doc, "spec", "ingress") != nil || dig(dd.doc, "spec", "egress") != nil ||
		!slices.Equal(strs(list(dig(dd.doc, "spec", "policyTypes"))), []string{"Ingress", "Egress"}) {
		t.Errorf("no NetworkPolicy default-deny selecting every pod of siteops for Ingress and Egress with no rule")
	}

	frontendLabels := podLabels(mustFind(t, tms, "Deployment", "temporal-frontend"))
	historyLabels := podLabels(mustFind(t, tms, "Deployment", "temporal-history"))
	postgres := ""
	if p, ok := find(ms, "NetworkPolicy", "siteops-egress-postgres"); ok {
		postgres, _, _ = strings.Cut(str(dig(list(dig(list(dig(p.doc, "spec", "egress"))[0], "to"))[0], "ipBlock", "cidr")), "/")
	}
	if postgres == "" {
		t.Fatal("no NetworkPolicy siteops-egress-postgres with an ipBlock: PostgreSQL is reached by address")
	}
	endpoints := map[string]endpoint{
		"dns":               podEndpoint("kube-system", map[string]any{"k8s-app": "kube-dns"}),
		"other-kube-system": podEndpoint("kube-system", map[string]any{"k8s-app": "metrics-server"}),
		"temporal-frontend": podEndpoint("temporal", frontendLabels),
		"temporal-history":  podEndpoint("temporal", historyLabels),
		"prometheus":        podEndpoint("monitoring", map[string]any{"app.kubernetes.io/name": "prometheus"}),
		"other-monitoring":  podEndpoint("monitoring", map[string]any{"app.kubernetes.io/name": "grafana"}),
		"otel":              podEndpoint("observability", map[string]any{"app.kubernetes.io/name": "opentelemetry-collector"}),
		"siteops-other":     podEndpoint("siteops", map[string]any{"app.kubernetes.io/name": "siteops", "app.kubernetes.io/component": "debug"}),
		"default-pod":       podEndpoint("default", map[string]any{"app": "anything"}),
		"postgres":          ipEndpoint(postgres),
		"internet":          ipEndpoint("93.184.216.34"),
		"metadata":          ipEndpoint("169.254.169.254"),
		"private":           ipEndpoint("10.20.30.40"),
	}
	ports := []port{{53, "UDP"}, {53, "TCP"}, {443, "TCP"}, {4318, "TCP"}, {5432, "TCP"}, {7233, "TCP"}, {7243, "TCP"},
		{webhook, "TCP"}, {metrics, "TCP"}, {admin, "TCP"}, {80, "TCP"}, {22, "TCP"}}

	// What each siteops pod needs. The PostgreSQL placeholder is a public
	// address (TEST-NET-1), so the pods that may reach HTTPS anywhere reach
	// it on 443 too.
	dns := []string{"dns 53/TCP", "dns 53/UDP"}
	egress := map[string][]string{
		"worker":         append([]string{"temporal-frontend 7233/TCP", "postgres 5432/TCP", "otel 4318/TCP", "internet 443/TCP", "postgres 443/TCP"}, dns...),
		"ingress":        append([]string{"temporal-frontend 7233/TCP", "postgres 5432/TCP", "otel 4318/TCP"}, dns...),
		"temporal-setup": append([]string{"temporal-frontend 7233/TCP"}, dns...),
		"doctor":         append([]string{"temporal-frontend 7233/TCP", "postgres 5432/TCP", "internet 443/TCP", "postgres 443/TCP"}, dns...),
		"postgres-roles": append([]string{"postgres 5432/TCP"}, dns...),
	}
	var fromAnywhere []string // the webhooks: every endpoint, the internet included
	for name := range endpoints {
		fromAnywhere = append(fromAnywhere, name+" "+port{webhook, "TCP"}.String())
	}
	ingress := map[string][]string{
		"worker":         {"prometheus " + port{metrics, "TCP"}.String()},
		"ingress":        append(fromAnywhere, "prometheus "+port{admin, "TCP"}.String()),
		"temporal-setup": nil,
		"doctor":         nil,
		"postgres-roles": nil,
	}

	admittedByTemporal := map[string]bool{}
	for _, m := range ms {
		if !isWorkload(m) {
			continue
		}
		labels := podLabels(m)
		component := str(labels["app.kubernetes.io/component"])
		want, known := egress[component]
		if !known {
			t.Errorf("%s: pods of component %q, which this test does not know: say what they may reach", m, component)
			continue
		}
		t.Run(m.name(), func(t *testing.T) {
			sort.Strings(want)
			if got := allowed(policies, "siteops", labels, "Egress", endpoints, ports); !slices.Equal(got, want) {
				t.Errorf("%s may reach %v; want %v", m, got, want)
			}
			wantIn := slices.Clone(ingress[component])
			sort.Strings(wantIn)
			if got := allowed(policies, "siteops", labels, "Ingress", endpoints, ports); !slices.Equal(got, wantIn) {
				t.Errorf("%s may be reached from %v; want %v", m, got, wantIn)
			}
		})
		// The Temporal side: the frontend admits exactly the pods that need it.
		self := map[string]endpoint{component: podEndpoint("siteops", labels)}
		grpc := []port{{7233, "TCP"}}
		if got := allowed(tpolicies, "temporal", frontendLabels, "Ingress", self, grpc); len(got) > 0 {
			admittedByTemporal[component] = true
		}
		if got := allowed(tpolicies, "temporal", historyLabels, "Ingress", self, []port{{7234, "TCP"}, {6934, "TCP"}}); len(got) > 0 {
			t.Errorf("the Temporal namespace lets %s reach the history service (%v); only the frontend", m, got)
		}
	}
	for component, want := range egress {
		needs := slices.Contains(want, "temporal-frontend 7233/TCP")
		if admittedByTemporal[component] != needs {
			t.Errorf("the frontend's NetworkPolicy admits siteops %s: %t; it needs the frontend: %t", component, admittedByTemporal[component], needs)
		}
	}
	for _, name := range []string{"siteops-other", "default-pod", "internet", "other-monitoring"} {
		if got := allowed(tpolicies, "temporal", frontendLabels, "Ingress", map[string]endpoint{name: endpoints[name]}, []port{{7233, "TCP"}, {7243, "TCP"}}); len(got) > 0 {
			t.Errorf("the Temporal namespace lets %s reach the frontend (%v); only the siteops pods that need it, by label", name, got)
		}
	}
	if got := allowed(tpolicies, "temporal", historyLabels, "Ingress", map[string]endpoint{"frontend": podEndpoint("temporal", frontendLabels)}, []port{{7234, "TCP"}}); len(got) == 0 {
		t.Errorf("the Temporal namespace keeps the frontend from the history service")
	}
	if got := allowed(tpolicies, "temporal", historyLabels, "Ingress", map[string]endpoint{"prometheus": endpoints["prometheus"]}, []port{{9090, "TCP"}}); len(got) == 0 {
		t.Errorf("the Temporal namespace keeps Prometheus from the services' metrics port 9090")
	}
	for _, p := range append(policies, tpolicies...) {
		if strings.Contains(filepath.Base(p.file), "example") {
			t.Errorf("%s: a NetworkPolicy in an example file is never applied", p)
		}
	}
}

func mustFind(t *testing.T, ms []manifest, kind, name string) manifest {
	t.Helper()
	m, ok := find(ms, kind, name)
	if !ok {
		t.Fatalf("no %s %s", kind, name)
	}
	return m
}
