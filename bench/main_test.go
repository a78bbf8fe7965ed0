package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/siteops/siteops/internal/devserver"
)

var server *devserver.Server

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		return m.Run() // no benchmark asked for: no server needed
	}
	if _, err := devserver.FindCLI(); err != nil {
		fmt.Fprintf(os.Stderr, "SKIP bench: %v\n", err)
		return 0
	}
	var err error
	server, err = devserver.Start(context.Background(), devserver.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	defer server.Stop()
	return m.Run()
}
