package worklease_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestREADMEProgramsAreExamples checks that each program the README shows
// whole is the example program it names, from its package clause on, so
// that what the README shows compiles and runs (go vet ./... and the
// example's own module build it).
func TestREADMEProgramsAreExamples(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)<!-- file: (\\S+) -->\n```go\n(.*?)\n```\n").FindAllStringSubmatch(string(readme), -1)
	require.NotEmpty(t, blocks, "the README shows no program whole")
	for _, b := range blocks {
		file, shown := b[1], b[2]
		src, err := os.ReadFile(file)
		require.NoError(t, err)
		i := strings.Index(string(src), "package main")
		require.GreaterOrEqual(t, i, 0, file)
		assert.Equal(t, strings.TrimRight(string(src[i:]), "\n"), shown, "the README's copy of %s", file)
	}
}
