package execstore_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The README's usage example is the runnable example, word for word.
func TestReadmeExampleIsTheRunnableOne(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	example, err := os.ReadFile("aio/example_test.go")
	require.NoError(t, err)
	body := string(example)
	body = body[strings.Index(body, "func Example() {"):]
	require.Contains(t, string(readme), body, "README.md's usage section is out of date with aio/example_test.go")
}
