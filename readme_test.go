package execstore_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The README's usage example is the runnable example, word for word.
func TestReadmeExampleIsTheRunnableOne(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	example, err := os.ReadFile("aio/example_test.go")
	require.NoError(t, err)
	body := string(example)
	imports := body[strings.Index(body, "import ("):]
	imports = imports[:strings.Index(imports, "\n)\n")+3]
	body = body[strings.Index(body, "func Example() {"):]
	require.Contains(t, string(readme), imports, "README.md's example imports are out of date with aio/example_test.go")
	require.Contains(t, string(readme), body, "README.md's example is out of date with aio/example_test.go")
}

// The README's inspection command reads the data directory and the database the example
// writes.
func TestReadmeInspectsWhatTheExampleWrote(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	example, err := os.ReadFile("aio/example_test.go")
	require.NoError(t, err)
	dir := regexp.MustCompile(`embedded\.Options\{Dir: "([^"]+)"\}`).FindSubmatch(example)
	require.NotNil(t, dir, "aio/example_test.go starts no embedded server on a data directory")
	require.Contains(t, string(example), "aio.Options{})", "the example opens another database than the command's default")
	require.Contains(t, string(readme), "go run ./cmd/execstore -embedded aio/"+string(dir[1])+" show order-1\n")
	require.Contains(t, string(readme), "`aio/"+string(dir[1])+"`, in database\n`execstore`")
}

// readmeMaxLines bounds the README: the front door, with the depth in docs/.
const readmeMaxLines = 300

func TestReadmeIsShort(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	lines := strings.Count(string(readme), "\n")
	if !strings.HasSuffix(string(readme), "\n") {
		lines++
	}
	require.LessOrEqual(t, lines, readmeMaxLines, "README.md has %d lines; move depth into docs/", lines)
}

// Every relative link in README.md and docs/*.md names a file or directory that exists,
// resolved from the file that holds the link; web links and anchors are not followed.
func TestReadmeLinksResolve(t *testing.T) {
	files := readmeDocs(t)
	for _, file := range files {
		text, err := os.ReadFile(file)
		require.NoError(t, err)
		for _, target := range markdownLinks(string(text)) {
			if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") ||
				strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
				continue
			}
			path, _, _ := strings.Cut(target, "#")
			resolved := filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
			_, err := os.Stat(resolved)
			assert.NoError(t, err, "%s links to %q, which does not exist (%s)", file, target, resolved)
		}
	}
}

// Every page under docs/ is reachable from the README.
func TestReadmeLinksEveryDoc(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	linked := map[string]bool{}
	for _, target := range markdownLinks(string(readme)) {
		path, _, _ := strings.Cut(target, "#")
		linked[filepath.Clean(filepath.FromSlash(path))] = true
	}
	for _, file := range readmeDocs(t) {
		if file == "README.md" {
			continue
		}
		assert.True(t, linked[filepath.Clean(file)], "README.md does not link to %s", file)
	}
}

// readmeDocs lists README.md and docs/*.md.
func readmeDocs(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, docs, "no docs/*.md")
	return append([]string{"README.md"}, docs...)
}

var (
	// fencedBlock is a ``` code block: what is inside is code, not links.
	fencedBlock = regexp.MustCompile("(?ms)^[ \t]*```.*?^[ \t]*```[^\n]*$")
	// codeSpan is an inline `code` span.
	codeSpan = regexp.MustCompile("`[^`\n]*`")
	// inlineLink is [text](target) or ![alt](target), with an optional "title".
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// refLink is a reference definition: [label]: target.
	refLink = regexp.MustCompile(`(?m)^[ \t]{0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?`)
)

// markdownLinks returns the targets of the inline links, images and reference definitions
// of a Markdown text, outside code.
func markdownLinks(text string) []string {
	text = fencedBlock.ReplaceAllString(text, "")
	// A link whose text is a code span, [`x`](y), keeps its target: blank the spans, not
	// what follows them.
	text = codeSpan.ReplaceAllStringFunc(text, func(s string) string { return strings.Repeat("x", len(s)) })
	var targets []string
	for _, m := range inlineLink.FindAllStringSubmatch(text, -1) {
		targets = append(targets, m[1])
	}
	for _, m := range refLink.FindAllStringSubmatch(text, -1) {
		targets = append(targets, m[1])
	}
	return targets
}

// The README's relay and sweeper sketch is made of the lines of relay's runnable example:
// each line of its code (its comments aside) is a line of relay/example_lease_test.go.
func TestReadmeRelaySketchIsFromTheExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	example, err := os.ReadFile("relay/example_lease_test.go")
	require.NoError(t, err)
	text := string(readme)
	start := strings.Index(text, "r := relay.New(")
	require.NotEqual(t, -1, start, "README.md shows relay.New")
	end := strings.Index(text[start:], "```")
	require.NotEqual(t, -1, end)
	lines := map[string]bool{}
	for _, l := range strings.Split(string(example), "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	for _, l := range strings.Split(text[start:start+end], "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "//") {
			continue
		}
		require.True(t, lines[l], "README.md's relay sketch has a line relay/example_lease_test.go does not: %q", l)
	}
}
