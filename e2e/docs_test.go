package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/internal/siteopstest"
)

// The marker a command block of docs/ that cannot run against the demo
// carries on the line before its fence, with the reason: <!-- not run:
// needs a Kubernetes cluster -->.
var notRunMarker = regexp.MustCompile(`^<!-- not run: (.*?) ?-->$`)

// demoShellMarker precedes the sample of the lines the demo prints to
// paste, in docs/operations.md.
const demoShellMarker = "<!-- e2e: demo-shell -->"

// shellLanguages are the fenced blocks that hold commands; a console
// block's commands are its lines that start with "$ ".
var shellLanguages = []string{"sh", "bash", "shell", "console"}

// TestDocsCommandBlocks runs every command block of docs/*.md, as written,
// against `siteops demo --keep` (the built binary, on a pseudo-terminal,
// with a payload key): once the demo has printed the lines to paste, each
// block runs in bash -euo pipefail after them, in a shell that holds
// nothing else of this machine's, and must exit 0 within 2 minutes (an
// unset variable fails it: the demo's lines set every one the docs use).
// A block whose output the docs show — a json block right after it — runs
// until its answer has the shape shown (the same keys at every level), as
// a reader would repeat a status query. A block that cannot run here
// carries <!-- not run: REASON --> on the line before its fence, and every
// fenced block names its language, so that a new command block runs or
// says why not. It also holds docs/operations.md's sample of the lines to
// the ones the demo prints, and checks that those name the files the keys
// are in, readable by their owner only, and never a key.
func TestDocsCommandBlocks(t *testing.T) {
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv(RequireCurlEnv) == "1" {
				t.Fatalf("the docs' commands need %s, which is not on PATH (Debian: apt-get install %s); %s=1 makes this a failure", tool, tool, RequireCurlEnv)
			}
			t.Skipf("SKIP: the docs' commands need %s", tool)
		}
	}
	blocks := docsBlocks(t)
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	payloadKey := base64.StdEncoding.EncodeToString(key)
	d := startKeptDemo(t, true, "SITEOPS_PAYLOAD_KEY="+payloadKey)
	checkShellLines(t, d, payloadKey)
	if !slices.Contains(exportedNames(d.shell), "SITEOPS_PAYLOAD_KEY_FILE") {
		t.Errorf("the demo ran with SITEOPS_PAYLOAD_KEY and its lines do not export SITEOPS_PAYLOAD_KEY_FILE:\n%s", strings.Join(d.shell, "\n"))
	}
	documented := demoShellSample(t, blocks)
	for _, c := range []struct{ what, doc, demo string }{
		{"exports", strings.Join(without(exportedNames(documented), "SITEOPS_PAYLOAD_KEY_FILE"), " "), strings.Join(without(exportedNames(d.shell), "SITEOPS_PAYLOAD_KEY_FILE"), " ")},
		{"unsets", strings.Join(without(unsetNames(documented), "SITEOPS_PAYLOAD_KEY_FILE"), " "), strings.Join(without(unsetNames(d.shell), "SITEOPS_PAYLOAD_KEY_FILE"), " ")},
	} {
		if c.doc != c.demo {
			t.Errorf("docs/operations.md's sample of the demo's lines %s\n  %s\nthe demo's lines (but for the payload key's file)\n  %s", c.what, c.doc, c.demo)
		}
	}

	env := shellEnvironment(t)
	ran := 0
	for _, b := range blocks {
		if !b.shell() || b.notRun != "" {
			continue
		}
		ran++
		t.Run(b.where(), func(t *testing.T) {
			if b.output == nil {
				if _, err := runDocBlock(t, d.shell, env, b); err != nil {
					t.Error(err)
				}
				return
			}
			want := jsonShape(t, b.output.body, b.output.where())
			siteopstest.EventuallyNil(t, 2*time.Minute, "an answer shaped as "+b.output.where()+" shows", func() error {
				out, err := runDocBlock(t, d.shell, env, b)
				if err != nil {
					t.Fatal(err)
				}
				var v any
				if err := json.Unmarshal(bytes.TrimSpace(out), &v); err != nil {
					return fmt.Errorf("the answer is not JSON (%w): %s", err, out)
				}
				if got := shape(v); got != want {
					return fmt.Errorf("the answer has the shape\n  %s\nthe docs show\n  %s\n%s", got, want, out)
				}
				return nil
			})
		})
	}
	if ran == 0 {
		t.Error("no command block of docs/ ran")
	}
}

// fencedBlock is a fenced code block of a page in docs/.
type fencedBlock struct {
	file string
	line int // its opening fence's, from 1
	lang string
	body string
	// notRun is the reason its marker gives for not running it.
	notRun string
	// output is the json block right after it: what it prints.
	output *fencedBlock
	// marker is the HTML comment on the line before its fence, if any.
	marker string
}

func (b *fencedBlock) where() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

func (b *fencedBlock) shell() bool { return slices.Contains(shellLanguages, b.lang) }

// commands is the block as bash runs it.
func (b *fencedBlock) commands() string {
	if b.lang != "console" {
		return b.body
	}
	var cmds []string
	for _, l := range strings.Split(b.body, "\n") {
		if c, ok := strings.CutPrefix(strings.TrimSpace(l), "$ "); ok {
			cmds = append(cmds, c)
		}
	}
	return strings.Join(cmds, "\n") + "\n"
}

// docsBlocks reads every fenced block of docs/*.md and fails the test, at
// once, for a block without a language, a marker without a reason, a
// marker that stands before no command block, and a page without blocks
// where the test expects some.
func docsBlocks(t *testing.T) []*fencedBlock {
	t.Helper()
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no pages in docs/: %v", err)
	}
	sort.Strings(pages)
	var blocks []*fencedBlock
	var problems []string
	for _, page := range pages {
		b, err := os.ReadFile(page) //nolint:gosec // a page of this repository
		if err != nil {
			t.Fatal(err)
		}
		found, p := fencedBlocks(filepath.ToSlash(strings.TrimPrefix(page, "../")), string(b))
		blocks, problems = append(blocks, found...), append(problems, p...)
	}
	if len(problems) > 0 {
		t.Fatalf("the command blocks of docs/ cannot be checked:\n  %s", strings.Join(problems, "\n  "))
	}
	return blocks
}

// fencedBlocks finds the fenced blocks of one page, and what is wrong with
// their languages and markers.
func fencedBlocks(file, text string) ([]*fencedBlock, []string) {
	var (
		blocks   []*fencedBlock
		problems []string
		open     *fencedBlock
		indent   string
		body     []string
		before   string // the last line that is not blank, outside a block
		previous *fencedBlock
	)
	lines := strings.Split(text, "\n")
	for i, raw := range lines {
		l := strings.TrimSpace(raw)
		if open != nil {
			if l == "```" {
				open.body = strings.Join(body, "\n") + "\n"
				blocks = append(blocks, open)
				previous, open, before = open, nil, "```"
				continue
			}
			body = append(body, strings.TrimPrefix(raw, indent))
			continue
		}
		if lang, ok := strings.CutPrefix(l, "```"); ok {
			open = &fencedBlock{file: file, line: i + 1, lang: strings.TrimSpace(lang)}
			indent, body = raw[:len(raw)-len(strings.TrimLeft(raw, " \t"))], nil
			if strings.HasPrefix(before, "<!--") {
				open.marker = before
			}
			switch m := notRunMarker.FindStringSubmatch(before); {
			case open.lang == "":
				problems = append(problems, fmt.Sprintf("%s: a fenced block names no language: sh for commands (they run against the demo), text for anything else", open.where()))
			case strings.HasPrefix(before, "<!-- not run") && (m == nil || strings.TrimSpace(m[1]) == ""):
				problems = append(problems, fmt.Sprintf("%s: %q gives no reason: <!-- not run: REASON -->", open.where(), before))
			case m != nil && !open.shell():
				problems = append(problems, fmt.Sprintf("%s: a %s block is marked not run; only command blocks run", open.where(), open.lang))
			case m != nil:
				open.notRun = m[1]
			}
			if open.lang == "json" && before == "```" && previous != nil && previous.shell() && previous.notRun == "" {
				previous.output = open
			}
			continue
		}
		if l == "" {
			continue
		}
		if strings.HasPrefix(before, "<!-- not run") {
			problems = append(problems, fmt.Sprintf("%s:%d: %q stands before no fenced block", file, i, before))
		}
		before = l
	}
	if open != nil {
		problems = append(problems, fmt.Sprintf("%s: a fenced block is never closed", open.where()))
	}
	return blocks, problems
}

// runDocBlock runs a block with bash after the demo's lines, in env, and
// returns its standard output; its error names the block and holds what
// it printed.
func runDocBlock(t *testing.T, shell, env []string, b *fencedBlock) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", strings.Join(shell, "\n")+"\n"+b.commands()) //nolint:gosec // the docs' own commands
	cmd.Env = env
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("the block at %s failed against the demo (%w):\n%s\nstandard output:\n%s\nstandard error:\n%s", b.where(), errors.Join(err, ctx.Err()), b.body, out, stderr.String())
	}
	return out, nil
}

// jsonShape is the shape of the JSON a docs block shows.
func jsonShape(t *testing.T, doc, where string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("%s is not JSON: %v", where, err)
	}
	return shape(v)
}

// shape is v's keys at every level, sorted, with an array's first
// element's: what stays the same from one run to the next, unlike ids and
// times.
func shape(v any) string {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + shape(v[k])
		}
		return "{" + strings.Join(parts, " ") + "}"
	case []any:
		if len(v) == 0 {
			return "[]"
		}
		return "[" + shape(v[0]) + "]"
	}
	return ""
}

// demoShellSample returns the lines of docs/operations.md's sample of what
// the demo prints to paste.
func demoShellSample(t *testing.T, blocks []*fencedBlock) []string {
	t.Helper()
	for _, b := range blocks {
		if b.marker == demoShellMarker {
			lines, err := shellLines(b.body + "\n")
			if err != nil {
				t.Fatalf("%s: %v", b.where(), err)
			}
			return lines
		}
	}
	t.Fatalf("no block of docs/ follows %s", demoShellMarker)
	return nil
}

// exportedNames are the variables lines export, in order.
func exportedNames(lines []string) []string {
	var names []string
	for _, l := range lines {
		if rest, ok := strings.CutPrefix(l, "export "); ok {
			name, _, _ := strings.Cut(rest, "=")
			names = append(names, name)
		}
	}
	return names
}

// unsetNames are the variables lines unset, in order.
func unsetNames(lines []string) []string {
	var names []string
	for _, l := range lines {
		if rest, ok := strings.CutPrefix(l, "unset "); ok {
			names = append(names, strings.Fields(rest)...)
		}
	}
	return names
}

func without(names []string, name string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == name })
}

// secretFile finds, in one of the demo's lines, the file it names for a
// secret: NAME_FILE='path', or "$(cat 'path')".
var secretFile = regexp.MustCompile(`(?:_FILE=|\$\(cat )'([^']+)'`)

// checkShellLines checks that the demo's lines name files for every key
// and token, each readable by its owner only, and that nothing the demo
// printed holds one of them, or the payload key it was given.
func checkShellLines(t *testing.T, d *keptDemo, payloadKey string) {
	t.Helper()
	secrets := map[string]string{}
	if payloadKey != "" {
		secrets["SITEOPS_PAYLOAD_KEY"] = payloadKey
	}
	for _, l := range d.shell {
		m := secretFile.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		fi, err := os.Stat(m[1])
		if err != nil {
			t.Errorf("the demo's line %s names a file that is not there: %v", l, err)
			continue
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v; want 0600", m[1], fi.Mode().Perm())
		}
		b, err := os.ReadFile(m[1])
		if err != nil {
			t.Fatal(err)
		}
		secrets[filepath.Base(m[1])] = strings.TrimSpace(string(b))
	}
	for _, name := range []string{"secret-key", "agentsite-api-key", "sim-admin-token"} {
		if _, ok := secrets[name]; !ok {
			t.Errorf("the demo's lines name no file %s:\n%s", name, strings.Join(d.shell, "\n"))
		}
	}
	out := d.out.String()
	for name, value := range secrets {
		if value == "" || strings.Contains(out, value) {
			t.Errorf("the demo printed the value of %s, or it is empty (never shown here)", name)
		}
	}
}

// TestDocsBlocksAreMarkedOrRun holds the rules TestDocsCommandBlocks reads
// docs/ by: a fenced block names its language, a marker gives its reason
// and stands right before a command block, and a json block right after a
// command block is that block's output.
func TestDocsBlocksAreMarkedOrRun(t *testing.T) {
	for _, c := range []struct {
		name, page string
		problem    string // empty: none
		run        int    // command blocks that run
		outputs    int    // of them, with an output shown
	}{
		{"runs", "```sh\nsiteops overview\n```\n", "", 1, 0},
		{"with its output", "```sh\ncurl x\n```\n\n```json\n{}\n```\n", "", 1, 1},
		{"output after prose is not its output", "```sh\ncurl x\n```\nThen:\n```json\n{}\n```\n", "", 1, 0},
		{"marked", "<!-- not run: needs a Kubernetes cluster -->\n\n```bash\nkubectl apply -k deploy/kubernetes\n```\n", "", 0, 0},
		{"indented in a list", "- item:\n\n  <!-- not run: starts a server -->\n  ```sh\n  siteops worker\n  ```\n", "", 0, 0},
		{"console", "```console\n$ siteops overview\nall clear\n```\n", "", 1, 0},
		{"no language", "```\nsiteops overview\n```\n", "names no language", 0, 0},
		{"no reason", "<!-- not run: -->\n```sh\nsiteops worker\n```\n", "gives no reason", 1, 0},
		{"marker before prose", "<!-- not run: a server -->\nSome text.\n```sh\nsiteops worker\n```\n", "stands before no fenced block", 1, 0},
		{"marker on output", "<!-- not run: output -->\n```text\nall clear\n```\n", "only command blocks run", 0, 0},
		{"never closed", "```sh\nsiteops overview\n", "never closed", 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			blocks, problems := fencedBlocks("docs/x.md", c.page)
			if got := strings.Join(problems, "; "); (c.problem == "") != (got == "") || !strings.Contains(got, c.problem) {
				t.Errorf("problems = %q, want %q", got, c.problem)
			}
			run, outputs := 0, 0
			for _, b := range blocks {
				if b.shell() && b.notRun == "" {
					run++
					if b.output != nil {
						outputs++
					}
				}
			}
			if run != c.run || outputs != c.outputs {
				t.Errorf("%d command blocks run, %d with an output; want %d and %d", run, outputs, c.run, c.outputs)
			}
		})
	}
	b, _ := fencedBlocks("docs/x.md", "```console\n$ siteops overview\nall clear\n$ siteops leads list\n```\n")
	if got := b[0].commands(); got != "siteops overview\nsiteops leads list\n" {
		t.Errorf("a console block runs %q", got)
	}
}
