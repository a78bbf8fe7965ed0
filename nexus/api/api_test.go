package api_test

import (
	"go/build"
	"strings"
	"testing"
)

// TestImportsNothingOfSiteops keeps the package what its doc promises to
// callers: it imports the standard library and the Nexus SDK, so that
// importing it pulls in no package of siteops (nor their dependencies).
func TestImportsNothingOfSiteops(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		first, _, _ := strings.Cut(imp, "/")
		if strings.Contains(first, ".") && imp != "github.com/nexus-rpc/sdk-go/nexus" {
			t.Errorf("package api imports %s; its callers would import it too. Keep to the standard library and the Nexus SDK (mirror the type here, and test the mirror in package nexus)", imp)
		}
	}
}
