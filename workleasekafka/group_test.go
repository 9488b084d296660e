package workleasekafka_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/worklease/worklease/workleasekafka"
)

// A commitLog sees every commit the cluster is asked for, before the
// cluster handles it, and checks it against the journal: no commit may
// pass a record that has not run to success.
type commitLog struct {
	mu         sync.Mutex
	j          *journal
	recs       map[int32][]int64 // produced offsets by partition, in order
	last       map[int32]int64   // the latest commit asked for, by partition
	commits    int
	violations []string
}

// watchedCluster starts an in-process cluster with topic, of partitions
// partitions, closed when t ends, and returns its address, a journal of
// the handlers' runs, and the log that checks every commit against it.
func watchedCluster(t testing.TB, partitions int32, topic string) ([]string, *journal, *commitLog) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	j := newJournal()
	return c.ListenAddrs(), j, watchCommits(c, j)
}

// watchCommits checks the commits of c, whose only topic is the one j
// records. (Recent versions of the request name a topic by its ID only.)
func watchCommits(c *kfake.Cluster, j *journal) *commitLog {
	l := &commitLog{j: j, recs: map[int32][]int64{}, last: map[int32]int64{}}
	c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		l.check(req.(*kmsg.OffsetCommitRequest))
		return nil, nil, false // observed only: the cluster handles it
	})
	return l
}

// produced adds records to what the log checks commits against.
func (l *commitLog) produced(recs []produced) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range recs {
		l.recs[r.partition] = append(l.recs[r.partition], r.offset)
	}
}

func (l *commitLog) check(req *kmsg.OffsetCommitRequest) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			l.commits++
			l.last[p.Partition] = p.Offset
			for _, o := range l.recs[p.Partition] {
				if o >= p.Offset {
					break
				}
				if !l.j.finished(p.Partition, o) {
					l.violations = append(l.violations, fmt.Sprintf("partition %d committed at %d past unfinished %d", p.Partition, p.Offset, o))
					break
				}
			}
		}
	}
}

// snapshot returns the latest commit asked for, by partition.
func (l *commitLog) snapshot() map[int32]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[int32]int64, len(l.last))
	for p, o := range l.last {
		out[p] = o
	}
	return out
}

// A group of consumers on one topic while members join, one leaves and one
// dies without committing: every key's records run in order, each at least
// once; none twice unless the member that died ran it first, above the
// last commit before it died; and no commit ever passed a record that had
// not run to success.
func TestGroup(t *testing.T) {
	t.Parallel()
	const partitions, keys, batch = 6, 300, 3000
	brokers, j, commits := watchedCluster(t, partitions, "orders")

	type member struct {
		c   *workleasekafka.Consumer
		ran chan error
	}
	start := func(id int) member {
		c, err := workleasekafka.New(clientOpts(brokers, "g", "orders"), func(ctx context.Context, r *kgo.Record) error {
			j.begin(r)
			a := workleasekafka.AttemptFromContext(ctx)
			var err error
			if r.Offset%13 == 0 && a == 1 {
				err = errors.New("a first attempt that fails")
			} else {
				// Some work, so that records are in flight as the group
				// changes; ended early if the attempt is cancelled.
				tm := time.NewTimer(200 * time.Microsecond)
				select {
				case <-tm.C:
				case <-ctx.Done():
					tm.Stop()
					err = ctx.Err()
				}
			}
			j.end(id, r, a, err == nil)
			return err
		}, workleasekafka.WithHandlers(32), workleasekafka.WithCommitMetadata(), fastBackoff,
			workleasekafka.WithCommitInterval(20*time.Millisecond), workleasekafka.WithRevokeTimeout(waitFor))
		require.NoError(t, err)
		m := member{c: c, ran: make(chan error, 1)}
		go func() { m.ran <- c.Run(context.Background()) }()
		return m
	}
	stop := func(m member, ctx context.Context) {
		err := m.c.Close(ctx)
		if ctx.Err() == nil {
			require.NoError(t, err)
		}
		require.NoError(t, <-m.ran)
	}
	var all []produced
	more := func() {
		recs := produce(t, brokers, "orders", batch, keys)
		commits.produced(recs)
		all = append(all, recs...)
	}

	more()
	m1 := start(1)
	j.waitCount(t, batch/3)
	m2 := start(2) // joins
	more()
	j.waitCount(t, batch)
	m3 := start(3) // joins
	j.waitCount(t, 3*batch/2)
	more()
	j.waitCount(t, 2*batch)

	// Member 2 dies: it commits nothing more, and its handlers are cancelled
	// at once; what it finished above the last commit runs again elsewhere.
	workleasekafka.Crash(m2.c)
	atCrash := commits.snapshot()
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	stop(m2, dead)
	deaths := j.mark()

	m4 := start(4) // joins
	more()
	j.waitCount(t, 3*batch)
	stop(m1, context.Background()) // leaves
	j.waitDone(t, all)
	stop(m3, context.Background())
	stop(m4, context.Background())

	j.checkOrder(t, all, true)
	commits.mu.Lock()
	assert.Empty(t, commits.violations)
	assert.Positive(t, commits.commits)
	commits.mu.Unlock()
	assert.Equal(t, ends(all), committed(t, brokers, "g", "orders"), "committed to the end")

	// Twice only if member 2 ran it first, before it died, above the last
	// commit then.
	j.mu.Lock()
	defer j.mu.Unlock()
	again := 0
	for key, runs := range j.runs {
		first := map[int64]int{} // index in runs of each offset's first success
		for i, r := range runs {
			if !r.ok {
				continue
			}
			f, seen := first[r.offset]
			if !seen {
				first[r.offset] = i
				continue
			}
			again++
			prior := runs[f]
			require.Equal(t, 2, prior.member, "key %s offset %d ran twice, first by member %d", key, r.offset, prior.member)
			require.Less(t, f, deaths[key], "key %s offset %d: member 2 ran it after it died", key, r.offset)
			require.GreaterOrEqual(t, r.offset, atCrash[r.partition], "key %s offset %d ran again below the commit at the crash", key, r.offset)
		}
	}
	t.Logf("%d records, %d commits, %d ran again after the crash", len(all), commits.commits, again)
}

// waitCount waits until n runs have succeeded.
func (j *journal) waitCount(t testing.TB, n int) {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		j.mu.Lock()
		got := 0
		for _, c := range j.done {
			got += c
		}
		ch := j.changed
		j.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%d of %d runs", got, n)
		}
	}
}

// mark returns, for each key, how many runs it has so far.
func (j *journal) mark() map[string]int {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make(map[string]int, len(j.runs))
	for k, rs := range j.runs {
		out[k] = len(rs)
	}
	return out
}
