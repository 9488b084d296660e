package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRecordValue(t *testing.T) {
	key, seq, ok := parseValue(recordValue("key-7", 42))
	require.True(t, ok)
	assert.Equal(t, "key-7", key)
	assert.Equal(t, 42, seq)
	for _, v := range []string{"", "key-7", "key-7#", "key-7#x", "key-7#-1"} {
		_, _, ok := parseValue([]byte(v))
		assert.False(t, ok, "%q", v)
	}
}

// run plays a run of two keys in one partition through c: "a" has records
// at offsets 0 and 2, "b" at 1.
func playRun(c *checker) {
	c.produced("a", 0, 0, 0)
	c.produced("b", 0, 0, 1)
	c.produced("a", 1, 0, 2)
	c.begin("b")
	c.end("b", 0, 1, 0, 1, true)
	c.begin("a")
	c.end("a", 0, 0, 0, 1, false) // retried
	c.begin("a")
	c.end("a", 0, 0, 0, 2, false) // the last attempt allowed: given up
	c.begin("a")
	c.end("a", 0, 2, 1, 1, true)
}

func TestCheckerPasses(t *testing.T) {
	c := newChecker(1)
	playRun(c)
	require.NoError(t, c.commit("t", 0, 3))
	out := c.finish(map[int32]int64{0: 0, 1: 5}, map[int32]int64{0: 3, 1: 5}, map[int32]int64{0: 3})
	assert.Equal(t, outcome{Keys: 2, Records: 3, Processed: 2, DeadLettered: 1, Retries: 1, Commits: 1}, out)
}

func TestCheckerCommits(t *testing.T) {
	c := newChecker(3)
	for o := range int64(5) {
		c.produced("a", int(o), 0, o)
	}
	require.NoError(t, c.commit("t", 0, 0))
	c.end("a", 0, 1, 1, 1, true)
	assert.ErrorContains(t, c.commit("t", 0, 1), "commit at 1 passes unfinished record 0")
	c.end("a", 0, 0, 0, 1, true)
	require.NoError(t, c.commit("t", 0, 2))
	assert.ErrorContains(t, c.commit("t", 0, 1), "commit at 1 goes back from 2")
	c.end("a", 0, 2, 2, 1, true)
	c.end("a", 0, 3, 3, 1, true)
	require.NoError(t, c.commit("t", 0, 4))
	assert.ErrorContains(t, c.commit("t", 0, 5), "commit at 5 passes unfinished record 4")
	out := c.finish(nil, nil, nil)
	assert.Equal(t, 3, out.CommitViolations, "each refused commit is a violation")

	done, _ := c.progress()
	assert.Equal(t, 4, done)
	assert.Equal(t, "partition 0 at offset 4", c.heldUp())
}

func TestCheckerFinds(t *testing.T) {
	for _, tc := range []struct {
		name string
		play func(c *checker)
		want string
	}{
		{"overlap", func(c *checker) { c.begin("a"); c.begin("a") }, `key "a": two attempts at once`},
		{"out of order", func(c *checker) {
			c.produced("a", 0, 0, 0)
			c.produced("a", 1, 0, 1)
			c.end("a", 0, 1, 1, 1, true)
		}, `key "a": attempt 1 at #1 (offset 1) ran, expected attempt 1 at #0 (offset 0)`},
		{"twice", func(c *checker) {
			c.produced("a", 0, 0, 0)
			c.end("a", 0, 0, 0, 1, true)
			c.end("a", 0, 0, 0, 1, true)
		}, "partition 0: offset 0 finished twice"},
		{"missed", func(c *checker) {
			c.produced("a", 0, 0, 0)
			c.produced("a", 1, 0, 1)
			c.end("a", 0, 0, 0, 1, true)
		}, `key "a": 1 of 2 records finished`},
		{"gave up early", func(c *checker) {
			c.produced("a", 0, 0, 0)
			c.produced("a", 1, 0, 1)
			c.end("a", 0, 0, 0, 1, false)
			c.end("a", 0, 1, 1, 1, true)
		}, `key "a": attempt 1 at #1 (offset 1) ran, expected attempt 2 at #0 (offset 0)`},
		{"not produced", func(c *checker) {
			c.produced("a", 1, 0, 0)
			c.end("a", 0, 0, 0, 1, true)
		}, `key "a": attempt 1 at #0 (offset 0) ran, expected attempt 1 at #0 (offset -1)`},
		{"acknowledged twice", func(c *checker) { c.produced("a", 0, 0, 0); c.produced("a", 1, 0, 0) }, "partition 0: offset 0 acknowledged after 0"},
		{"two partitions", func(c *checker) { c.produced("a", 0, 0, 0); c.produced("a", 1, 1, 0) }, `key "a": produced to partitions 0 and 1`},
		{"foreign", func(c *checker) { c.foreign("a", 3, []byte("x")) }, `key "a": offset 3: a record this run did not produce ("x")`},
		{"not committed", func(c *checker) {}, "partition 2: committed at 0, not at its end 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newChecker(1)
			tc.play(c)
			out := c.finish(map[int32]int64{2: 0}, map[int32]int64{2: 1}, nil)
			assert.Contains(t, out.Violations, tc.want)
		})
	}
}

func TestCheckerCountsViolations(t *testing.T) {
	c := newChecker(1)
	for range maxViolations + 5 {
		c.begin("a")
		c.begin("a")
	}
	out := c.finish(nil, nil, nil)
	assert.Len(t, out.Violations, maxViolations)
	assert.Equal(t, 2*(maxViolations+5)-1, out.OrderViolations)
}
