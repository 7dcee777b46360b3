package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// docs/DEPLOY.md tells an endpoint picker what to read, and its current
// release (llm-d-router, where the Gateway API Inference Extension's
// endpoint picker moved) refuses the old metric flags at start: the doc
// gives an EndpointPickerConfig instead, and every metric it names is a
// series this server serves, with the class label it selects.
func TestDeployDocNamesTheServersSeries(t *testing.T) {
	b, err := os.ReadFile("../../docs/DEPLOY.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, gone := range []string{"--total-queued-requests-metric=", "--total-running-requests-metric=", "--kv-cache-usage-percentage-metric="} {
		if strings.Contains(doc, gone) {
			t.Errorf("DEPLOY.md gives %s, which the endpoint picker refuses at start (since the extension's v1.4.0)", gone)
		}
	}
	for _, want := range []string{"apiVersion: llm-d.ai/v1alpha1", "kind: EndpointPickerConfig", "type: core-metrics-extractor", objectiveHeader, oldObjectiveHeader} {
		if !strings.Contains(doc, want) {
			t.Errorf("DEPLOY.md lacks %q", want)
		}
	}
	specs := regexp.MustCompile(`(queuedRequestsSpec|runningRequestsSpec|kvUsageSpec): *'([a-z_]+)\{class=([a-z]+)\}'`).FindAllStringSubmatch(doc, -1)
	if len(specs) < 3 {
		t.Fatalf("DEPLOY.md gives %d metric specs; want the three an engine config reads", len(specs))
	}
	s := start(t, testConfig(t, modePartitioned))
	defer s.stop(t)
	m := scrape(t, s.base+"/metrics")
	for _, sp := range specs {
		series := sp[2] + `{class="` + sp[3] + `"}`
		if _, ok := m[series]; !ok {
			t.Errorf("DEPLOY.md's %s names %s, which /metrics does not serve", sp[1], series)
		}
	}
}

// The DRA manifest's device metadata path (deploy/server-dra.yaml, and
// DEPLOY.md beside the claim) is the one the kubelet mounts for its claim:
// resourceclaimtemplates/<pod claim>/<request>/<driver>-metadata.json.
func TestDRAMetadataPathMatchesTheClaim(t *testing.T) {
	b, err := os.ReadFile("../../deploy/server-dra.yaml")
	if err != nil {
		t.Fatal(err)
	}
	y := string(b)
	find := func(re string) string {
		t.Helper()
		m := regexp.MustCompile(re).FindStringSubmatch(y)
		if m == nil {
			t.Fatalf("server-dra.yaml: no match for %s", re)
		}
		return m[1]
	}
	podClaim := find(`resourceClaims:\s*\n\s*- name: ([a-z0-9-]+)`)
	request := find(`requests:\s*\n\s*- name: ([a-z0-9-]+)`)
	driver := find(`deviceClassName: ([a-z0-9.-]+)`) // NVIDIA's class is named as its driver
	want := "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/" + podClaim + "/" + request + "/" + driver + "-metadata.json"
	if got := find(`FCSP_DRA_METADATA[^/]*(/var/run/\S+\.json)`); got != want {
		t.Errorf("server-dra.yaml's FCSP_DRA_METADATA %s; the claim's file is %s", got, want)
	}
	d, err := os.ReadFile("../../docs/DEPLOY.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(d), want) {
		t.Errorf("DEPLOY.md does not show %s", want)
	}
}
